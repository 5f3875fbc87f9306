#include "attn_oracle/case/enum_names.h"

namespace ao {

namespace {
template <class E>
const char* canonical(E e) {
  for (const auto& n : enum_names<E>())
    if (n.value == e) return n.name;
  return "?";
}
}  // namespace

#define AO_ENUM_NAMES(E, ...)                                   \
  template <>                                                   \
  std::span<const EnumName<E>> enum_names<E>() {                \
    static constexpr EnumName<E> k[] = {__VA_ARGS__};           \
    return k;                                                   \
  }                                                             \
  const char* to_string(E e) { return canonical(e); }

AO_ENUM_NAMES(Op, {"indexer", Op::Indexer}, {"sdpa", Op::Sdpa})
AO_ENUM_NAMES(MaskKind, {"none", MaskKind::None}, {"topleft", MaskKind::TopLeft}, {"causal", MaskKind::TopLeft},
              {"bottomright", MaskKind::BottomRight})
AO_ENUM_NAMES(CpScheme, {"zigzag", CpScheme::Zigzag}, {"contiguous", CpScheme::Contiguous})
AO_ENUM_NAMES(Poison, {"nan", Poison::NaN}, {"inf", Poison::Inf}, {"large", Poison::Large}, {"none", Poison::None})
AO_ENUM_NAMES(Precision, {"fp32", Precision::F32}, {"fp64", Precision::F64})
AO_ENUM_NAMES(PadWrites, {"forbid", PadWrites::Forbid}, {"allow", PadWrites::Allow})
AO_ENUM_NAMES(Probe, {"none", Probe::None}, {"edges", Probe::Edges})
AO_ENUM_NAMES(DType, {"fp32", DType::F32}, {"bf16", DType::BF16}, {"fp16", DType::F16})
AO_ENUM_NAMES(WindowConvention, {"cudnn", WindowConvention::Cudnn}, {"fa", WindowConvention::Fa})
AO_ENUM_NAMES(EmptyRows, {"neginf", EmptyRows::NegInf}, {"posinf", EmptyRows::PosInf})
AO_ENUM_NAMES(Values, {"normal", Values::Normal}, {"extreme", Values::Extreme}, {"plateau", Values::Plateau},
              {"clustered", Values::Clustered})
AO_ENUM_NAMES(Ties, {"set", Ties::Set}, {"strict", Ties::Strict})
AO_ENUM_NAMES(Pass, {"fwd", Pass::Fwd}, {"bwd", Pass::Bwd})
AO_ENUM_NAMES(GradPad, {"untouched", GradPad::Untouched}, {"zero", GradPad::Zero})
AO_ENUM_NAMES(LossMean, {"rows", LossMean::Rows}, {"valid", LossMean::Valid}, {"keyed", LossMean::Keyed},
              {"sum", LossMean::Sum})

#undef AO_ENUM_NAMES

}  // namespace ao

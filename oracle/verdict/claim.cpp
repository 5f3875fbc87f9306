#include "attn_oracle/verdict/claim.h"

#include <utility>

#include <fmt/format.h>

namespace ao {

ClaimedVerdict apply_claim(Verdict trial, const CatchesClaim* claim, const std::string& backend_identity) {
  ClaimedVerdict out{std::move(trial), ClaimCheck::NotChecked};
  if (!claim || claim->identity != backend_identity || out.verdict.kind == Verdict::Skipped) return out;
  if (out.verdict.kind != Verdict::Pass) {
    out.check = ClaimCheck::Held;
    return out;
  }
  out.check = ClaimCheck::NotHeld;
  out.verdict.kind = Verdict::Fail;
  out.verdict.reason =
      fmt::format("claim not held: {}:{} '# catches: {}', but the case passed", claim->file, claim->line, claim->spec);
  return out;
}

}  // namespace ao

#include "attn_oracle/verdict/claim.h"

#include <utility>

#include <fmt/format.h>

namespace ao {

ClaimedVerdict apply_claim(Verdict trial, const CatchesClaim* claim, const std::string& backend_identity) {
  ClaimedVerdict out{std::move(trial), ClaimCheck::NotChecked};
  if (!claim || claim->identity != backend_identity || out.verdict.kind == Verdict::Skipped) return out;
  if (is_failure(out.verdict.kind)) {  // a weak verdict failed nothing: the claim did not hold
    out.check = ClaimCheck::Held;
    return out;
  }
  out.check = ClaimCheck::NotHeld;
  const std::string how = out.verdict.kind == Verdict::Weak ? "failed no metric (" + out.verdict.reason + ")" : "passed";
  out.verdict.kind = Verdict::Fail;
  out.verdict.reason =
      fmt::format("claim not held: {}:{} '# catches: {}', but the case {}", claim->file, claim->line, claim->spec, how);
  return out;
}

}  // namespace ao

// A case's claim about a backend and the verdict it gives a run: `# catches: <backend>` in a case file
// (fuzz/include/attn_oracle/fuzz/case_file.h) says that <backend> fails the case. A corpus run (`gate`) replays the case on each
// backend; where the claim names the backend that ran, the claim is checked against the trial's verdict:
//   * the run was skipped: nothing is checked (a skip says nothing about the backend's answer);
//   * the run failed or errored: the claim held, the verdict stays;
//   * the run passed, or was weak (no metric failed): the claim did not hold (the corpus lost its teeth,
//     or the comparator went blind):
//     the verdict becomes a Fail whose reason names the claim.
// A claim naming another backend, or no claim, leaves the verdict as it is.
#pragma once
#include <string>

#include "attn_oracle/verdict/verdict.h"

namespace ao {

struct CatchesClaim {
  std::string spec;      // the backend as written after `# catches:`
  std::string identity;  // its identity (normalize_backend_spec, SpecForm::Identity), compared with the run's
  std::string file;      // where the claim is written
  int line = 0;
};

enum class ClaimCheck { NotChecked, Held, NotHeld };

struct ClaimedVerdict {
  Verdict verdict;  // the verdict of the run, as the claim leaves it
  ClaimCheck check = ClaimCheck::NotChecked;
};

// `claim`: the case's claim, or null; `backend_identity`: the identity of the backend that ran.
ClaimedVerdict apply_claim(Verdict trial, const CatchesClaim* claim, const std::string& backend_identity);

}  // namespace ao

// Choice-sequence shrinking (see choice_shrink.h). Passes, repeated until one round changes nothing:
// drop a list element (lower a count() choice by one and delete up to 8 choices after it: plain
// deletion would make what follows misread), delete blocks of 2^j choices (largest first), zero
// blocks, halve or decrement single choices, lower any choice by one and delete up to 4 after it,
// and swap a choice with a smaller successor.
#include "attn_oracle/fuzz/choice_shrink.h"

#include <map>
#include <set>

#include "attn_oracle/internal/interrupt.h"

namespace ao {

namespace {
int64_t tokens(const Case& c) {
  int64_t t = 0;
  for (auto L : c.q_lens) t += L;
  for (auto L : c.kv_lens) t += L;
  return t;
}
}  // namespace

ChoiceShrinkResult shrink_choices(const Choices& failing, const GenOptions& gen, const StillFails& still_fails,
                                  const ShrinkOptions& opt) {
  ChoiceShrinkResult r;
  Choices best;
  std::vector<Choice> best_record;
  r.minimal = replay_choices(failing, gen, &best, &best_record);
  std::string best_line = print_case(r.minimal);
  std::map<std::string, bool> tried = {{best_line, true}};  // case line -> still fails
  std::set<Choices> played;
  // Generator replays are cheap but not free: bounded so a huge sequence cannot loop for long.
  const int max_replays = 20000 + 50 * std::max(opt.max_runs, 0);
  bool out_of_runs = false;
  auto stopped = [&] { return r.stop != ShrinkStop::Minimum || out_of_runs || r.replays >= max_replays; };
  // Tries one candidate sequence; true when it became the new minimum.
  auto consider = [&](Choices cand) {
    cand = canonical(std::move(cand));
    if (stopped() || !shortlex_less(cand, best) || !played.insert(cand).second) return false;
    ++r.replays;
    Choices eff;
    std::vector<Choice> rec;
    Case c;
    try {
      c = replay_choices(cand, gen, &eff, &rec);
    } catch (const BadInput&) {
      return false;  // a generator bug (the generator tests catch it); not a candidate
    }
    // Smaller means fewer valid tokens, then shortlex: shortlex alone would trade a few choices for a
    // much larger case (one huge document instead of a few small ones) and could not leave a family
    // whose sequences are short (a few small documents take more choices than one huge one).
    const int64_t t = tokens(c), tb = tokens(r.minimal);
    if (t > tb || (t == tb && !shortlex_less(eff, best))) return false;
    const std::string line = print_case(c);
    auto it = tried.find(line);
    if (it == tried.end()) {
      if (!shrinkable_valid(c, opt.lim)) {  // e.g. over this run's layout limits
        tried[line] = false;
        return false;
      }
      if (r.runs >= opt.max_runs) {
        out_of_runs = true;
        return false;
      }
      // Checked before every run, so no run starts after a stop request or the deadline.
      if (interrupted() != 0) r.stop = ShrinkStop::Interrupted;
      else if (std::chrono::steady_clock::now() >= opt.deadline) r.stop = ShrinkStop::Deadline;
      if (r.stop != ShrinkStop::Minimum) return false;
      ++r.runs;
      const bool fails = still_fails(c);
      if (interrupted() != 0) {  // a run cut short by a stop request proves nothing
        r.stop = ShrinkStop::Interrupted;
        return false;
      }
      it = tried.emplace(line, fails).first;
    }
    if (!it->second) return false;
    if (line != best_line) ++r.steps;
    best = std::move(eff);
    best_record = std::move(rec);
    best_line = line;
    r.minimal = std::move(c);
    return true;
  };
  auto without = [](const Choices& s, size_t i, size_t k) {
    Choices out(s.begin(), s.begin() + long(i));
    out.insert(out.end(), s.begin() + long(std::min(s.size(), i + k)), s.end());
    return out;
  };

  bool progress = true;
  while (progress && !stopped()) {
    progress = false;
    size_t top = 1;
    while (top * 2 <= best.size()) top *= 2;
    // 1. Drop one element of a list: lower its count and delete up to 8 choices after it.
    for (size_t i = 0; i < best.size() && !stopped(); ++i)
      for (size_t k = 1; k <= 8 && i < best.size() && best[i] > 0 && best_record[i].count && i + 1 + k <= best.size(); ++k) {
        Choices cand = without(best, i + 1, k);
        --cand[i];
        if (consider(std::move(cand))) {
          progress = true;
          break;
        }
      }
    // 2. Delete blocks, largest first.
    for (size_t k = top; k >= 1 && !stopped(); k /= 2)
      for (size_t i = 0; i + k <= best.size() && !stopped();)
        if (consider(without(best, i, k))) progress = true;
        else ++i;
    // 3. Zero blocks.
    for (size_t k = top; k >= 1 && !stopped(); k /= 2)
      for (size_t i = 0; i + k <= best.size() && !stopped(); ++i) {
        Choices cand = best;
        bool any = false;
        for (size_t j = i; j < i + k; ++j) {
          any |= cand[j] != 0;
          cand[j] = 0;
        }
        if (any) progress |= consider(std::move(cand));
      }
    // 4. Lower single choices: halve, then decrement.
    for (size_t i = 0; i < best.size() && !stopped(); ++i)
      for (uint64_t v : {best[i] / 2, best[i] - 1}) {
        if (i >= best.size() || best[i] == 0 || v >= best[i]) continue;
        Choices cand = best;
        cand[i] = v;
        progress |= consider(std::move(cand));
      }
    // 5. Lower any choice by one and delete up to 4 after it (nested structure without a count).
    for (size_t i = 0; i < best.size() && !stopped(); ++i)
      for (size_t k = 1; k <= 4 && i < best.size() && best[i] > 0 && i + 1 + k <= best.size(); ++k) {
        Choices cand = without(best, i + 1, k);
        --cand[i];
        if (consider(std::move(cand))) {
          progress = true;
          break;
        }
      }
    // 6. Sort neighbours.
    for (size_t i = 0; i + 1 < best.size() && !stopped(); ++i)
      if (best[i] > best[i + 1]) {
        Choices cand = best;
        std::swap(cand[i], cand[i + 1]);
        progress |= consider(std::move(cand));
      }
  }
  if (out_of_runs && r.stop == ShrinkStop::Minimum) r.stop = ShrinkStop::RunBudget;
  r.budget_exhausted = r.stop == ShrinkStop::RunBudget;
  r.choices = best;
  return r;
}

}  // namespace ao

// Choice sources (as in Hypothesis): the generator (generator.h) draws every decision it makes from
// a ChoiceSource, so a generated case is a pure function of its choice sequence. Three sources:
//  * RandomChoices: a seeded PRNG (the campaign's case #index of seed), recording what it drew;
//  * ReplayChoices: plays a recorded sequence back (shrinking edits that sequence; a found case stores it);
//  * FdpChoices: a libFuzzer input through FuzzedDataProvider (fuzz_differential; header-only, below).
// A choice is stored so that 0 is always the simplest outcome: an integer's distance above its
// `simplest` value (default lo; the values below it follow after hi, cyclically), the option's
// position after the simplest one for a pick (default: the first), and for a chance whether it
// came out other than its simplest outcome (default: false). The PRNG source draws the outcome
// itself, so naming a simplest value changes what shrinking moves toward, never which case a
// (seed, index) generates. Past the end of
// a sequence, or of a fuzzer input, every source answers 0: deleting choices always gives a case.
// A decision with one possible outcome (lo == hi) draws and records nothing.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace ao {

using Choices = std::vector<uint64_t>;

// One recorded decision: its value (0..max) and its range, which the byte encoder needs.
struct Choice {
  uint64_t value = 0, max = 0;
  bool flag = false;   // a chance(p) (FdpChoices reads one byte for it)
  bool count = false;  // the length of a list whose elements' choices follow it (shrinking drops one)
};

class ChoiceSource {
 public:
  virtual ~ChoiceSource() = default;
  // An integer in [lo, hi] (lo when hi <= lo, drawing nothing) that shrinks toward `simplest`.
  int64_t integer(int64_t lo, int64_t hi) { return integer(lo, hi, lo); }
  int64_t integer(int64_t lo, int64_t hi, int64_t simplest);
  // integer() for the length of a list whose elements are drawn next (a shrinking hint).
  int64_t count(int64_t lo, int64_t hi);
  // true with probability p under RandomChoices; `simplest` is the outcome shrinking moves toward.
  bool chance(double p, bool simplest = false);
  // One option (uniformly under RandomChoices); shrinks toward xs[simplest].
  template <class T>
  T pick(std::initializer_list<T> xs, size_t simplest = 0) {
    return *(xs.begin() + integer(0, int64_t(xs.size()) - 1, int64_t(simplest)));
  }
  // pick() whose PRNG draw follows `weights` (one per option, >= 0, not all 0). The weights steer
  // only what RandomChoices draws: a replay or a fuzzer input reads the same stored value as pick()'s,
  // so a shrunk or replayed case does not depend on them.
  template <class T>
  T pick_weighted(std::initializer_list<T> xs, const std::vector<double>& weights, size_t simplest = 0) {
    return *(xs.begin() + weighted(int64_t(xs.size()) - 1, int64_t(simplest), weights));
  }
  // integer(lo, hi, simplest) whose PRNG draw follows weights[v - lo] (as pick_weighted()).
  int64_t integer_weighted(int64_t lo, int64_t hi, int64_t simplest, const std::vector<double>& weights) {
    return hi <= lo ? lo : lo + weighted(hi - lo, simplest - lo, weights);
  }
  // A decision in [0, n] that the campaign's PRNG source takes from its case number (round-robin
  // over the n + 1 outcomes, rotated by the seed) instead of drawing it, so that every outcome comes
  // up within n + 1 consecutive cases; replayed and fuzzer sources read it like integer(0, n). A
  // second scheduled decision of the same case takes the next digit (case number / (n + 1)), so it
  // turns once per round of the first.
  int64_t scheduled(int64_t n);
  // What was drawn so far, in order (the effective sequence of a replay: clamped, zeros past the end).
  const std::vector<Choice>& record() const { return record_; }
  Choices values() const;

 protected:
  // The stored value of an integer decision: in [0, max] (max >= 1); its outcome is lo + (value +
  // shift) mod (max + 1). The PRNG draws the outcome and returns its stored value.
  virtual uint64_t draw(uint64_t max, uint64_t shift) = 0;
  // The stored value of a chance: the outcome is `value != simplest`.
  virtual bool draw_flag(double p, bool simplest) = 0;
  // The stored value of a weighted pick (outcome i drawn with probability weights[i] / sum), and of a
  // scheduled decision; by default the plain draw.
  virtual uint64_t draw_weighted(uint64_t max, uint64_t shift, const std::vector<double>&) { return draw(max, shift); }
  virtual uint64_t draw_scheduled(uint64_t max) { return draw(max, 0); }

 private:
  int64_t weighted(int64_t hi, int64_t simplest, const std::vector<double>& weights);
  std::vector<Choice> record_;
};

// The campaign's source: case `index` of campaign `seed` (splitmix64 stream).
class RandomChoices : public ChoiceSource {
 public:
  RandomChoices(uint64_t seed, uint64_t index);

 protected:
  uint64_t draw(uint64_t max, uint64_t shift) override;
  bool draw_flag(double p, bool simplest) override;
  uint64_t draw_weighted(uint64_t max, uint64_t shift, const std::vector<double>& weights) override;
  uint64_t draw_scheduled(uint64_t max) override;

 private:
  uint64_t next();
  uint64_t state_;
  uint64_t turn_;  // case number + a rotation by seed; scheduled() decisions take its digits
};

// Plays `seq` back: a value above a decision's range is clamped to it; past the end, 0.
class ReplayChoices : public ChoiceSource {
 public:
  explicit ReplayChoices(Choices seq) : seq_(std::move(seq)) {}

 protected:
  uint64_t draw(uint64_t max, uint64_t shift) override;
  bool draw_flag(double p, bool simplest) override;

 private:
  uint64_t take();
  Choices seq_;
  size_t at_ = 0;
};

// The effective sequence without trailing zeros (which replay the same): shrinking's canonical form.
Choices canonical(Choices seq);
// Shortlex order (shorter first, then lexicographically smaller): what shrinking minimises.
bool shortlex_less(const Choices& a, const Choices& b);
// "3 0 17 ..." and back. Throws BadInput("choices", ...) on anything but non-negative integers.
std::string choices_text(const Choices& seq);
Choices parse_choices(const std::string& text);

// libFuzzer's bytes as choices (Provider: FuzzedDataProvider): an integer decision consumes
// ConsumeIntegralInRange(0, max) (from the input's end), a chance one ConsumeBool; an exhausted
// provider answers 0. fdp_bytes() is the inverse: the input whose decisions replay `record`.
template <class Provider>
class FdpChoices : public ChoiceSource {
 public:
  explicit FdpChoices(Provider& p) : p_(p) {}

 protected:
  uint64_t draw(uint64_t max, uint64_t) override { return p_.template ConsumeIntegralInRange<uint64_t>(0, max); }
  bool draw_flag(double, bool) override { return p_.ConsumeBool(); }

 private:
  Provider& p_;
};
std::vector<uint8_t> fdp_bytes(const std::vector<Choice>& record);

}  // namespace ao

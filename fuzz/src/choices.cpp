#include "attn_oracle/fuzz/choices.h"

#include <algorithm>
#include <sstream>

#include "attn_oracle/case/case.h"
#include "attn_oracle/internal/rng.h"

namespace ao {

namespace {
// (v + shift) mod (max + 1) without overflow, for v, shift <= max.
uint64_t rotate(uint64_t v, uint64_t shift, uint64_t max) { return v <= max - shift ? v + shift : v - (max - shift) - 1; }
}  // namespace

int64_t ChoiceSource::integer(int64_t lo, int64_t hi, int64_t simplest) {
  if (hi <= lo) return lo;
  const uint64_t max = uint64_t(hi) - uint64_t(lo);
  const uint64_t shift = uint64_t(std::clamp(simplest, lo, hi)) - uint64_t(lo);
  const uint64_t v = std::min(draw(max, shift), max);
  record_.push_back({v, max, false});
  return int64_t(uint64_t(lo) + rotate(v, shift, max));
}

int64_t ChoiceSource::count(int64_t lo, int64_t hi) {
  const size_t before = record_.size();
  const int64_t n = integer(lo, hi);
  if (record_.size() > before) record_.back().count = true;
  return n;
}

int64_t ChoiceSource::weighted(int64_t hi, int64_t simplest, const std::vector<double>& weights) {
  if (hi <= 0) return 0;
  const uint64_t max = uint64_t(hi);
  const uint64_t shift = uint64_t(std::clamp<int64_t>(simplest, 0, hi));
  const uint64_t v = std::min(draw_weighted(max, shift, weights), max);
  record_.push_back({v, max, false});
  return int64_t(rotate(v, shift, max));
}

int64_t ChoiceSource::scheduled(int64_t n) {
  if (n <= 0) return 0;
  const uint64_t v = std::min(draw_scheduled(uint64_t(n)), uint64_t(n));
  record_.push_back({v, uint64_t(n), false});
  return int64_t(v);
}

bool ChoiceSource::chance(double p, bool simplest) {
  const bool v = draw_flag(p, simplest);
  record_.push_back({v ? 1u : 0u, 1, true});
  return v != simplest;
}

Choices ChoiceSource::values() const {
  Choices out;
  out.reserve(record_.size());
  for (const auto& c : record_) out.push_back(c.value);
  return out;
}

RandomChoices::RandomChoices(uint64_t seed, uint64_t index)
    : state_(splitmix64(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) ^ splitmix64(index + 0xABCDEFull)),
      turn_(index + splitmix64(seed) % 1024) {}

uint64_t RandomChoices::next() { return splitmix64(state_++ * 0x2545F4914F6CDD1Dull); }
uint64_t RandomChoices::draw(uint64_t max, uint64_t shift) {
  const uint64_t outcome = max == ~uint64_t(0) ? next() : next() % (max + 1);
  return shift == 0 ? outcome : rotate(outcome, max - shift + 1, max);  // the stored value of this outcome
}
uint64_t RandomChoices::draw_weighted(uint64_t max, uint64_t shift, const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += std::max(0.0, w);
  if (weights.size() != max + 1 || !(total > 0)) return draw(max, shift);
  double u = double(next() >> 11) * 0x1.0p-53 * total;
  uint64_t outcome = 0;
  for (double w : weights) {
    if (outcome == max || u < std::max(0.0, w)) break;
    u -= std::max(0.0, w);
    ++outcome;
  }
  return shift == 0 ? outcome : rotate(outcome, max - shift + 1, max);
}
uint64_t RandomChoices::draw_scheduled(uint64_t max) {  // the next digit of the turn, in base max + 1
  const uint64_t v = turn_ % (max + 1);
  turn_ /= max + 1;
  return v;
}
bool RandomChoices::draw_flag(double p, bool simplest) { return (double(next() >> 11) * 0x1.0p-53 < p) != simplest; }

uint64_t ReplayChoices::take() { return at_ < seq_.size() ? seq_[at_++] : 0; }
uint64_t ReplayChoices::draw(uint64_t max, uint64_t) { return std::min(take(), max); }
bool ReplayChoices::draw_flag(double, bool) { return take() != 0; }

Choices canonical(Choices seq) {
  while (!seq.empty() && seq.back() == 0) seq.pop_back();
  return seq;
}

bool shortlex_less(const Choices& a, const Choices& b) {
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

std::string choices_text(const Choices& seq) {
  std::string s;
  for (uint64_t v : seq) {
    if (!s.empty()) s += ' ';
    s += std::to_string(v);
  }
  return s;
}

Choices parse_choices(const std::string& text) {
  Choices out;
  std::istringstream is(text);
  std::string tok;
  while (is >> tok) {
    if (tok.find_first_not_of("0123456789") != std::string::npos || tok.size() > 19)
      throw BadInput("choices", tok, "must be non-negative integers separated by spaces");
    out.push_back(std::stoull(tok));
  }
  return out;
}

std::vector<uint8_t> fdp_bytes(const std::vector<Choice>& record) {
  // FuzzedDataProvider takes integers from the end of the input, most significant byte first, one
  // byte per 8 bits of the range; a bool is the low bit of one byte.
  std::vector<uint8_t> consumed;
  for (const auto& c : record) {
    if (c.flag) {
      consumed.push_back(uint8_t(c.value & 1));
      continue;
    }
    int bytes = 0;
    for (uint64_t r = c.max; r > 0 && bytes < 8; r >>= 8) ++bytes;
    for (int b = bytes - 1; b >= 0; --b) consumed.push_back(uint8_t(c.value >> (8 * b)));
  }
  std::reverse(consumed.begin(), consumed.end());
  return consumed;
}

}  // namespace ao

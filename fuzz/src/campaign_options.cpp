#include "attn_oracle/fuzz/campaign_options.h"

#include <algorithm>

#include <fmt/format.h>

#include "attn_oracle/internal/bad_input.h"

namespace ao {

Budget parse_budget(const std::string& s) {
  Budget b;
  if (s.empty()) throw BadInput("budget", s, "empty (use e.g. 60s, 5m or a case count)");
  const char unit = s.back();
  const std::string num = (unit == 's' || unit == 'm' || unit == 'h') ? s.substr(0, s.size() - 1) : s;
  if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 12)
    throw BadInput("budget", s, "must be a number of cases (N) or a time (Ns, Nm, Nh)");
  const uint64_t n = std::stoull(num);
  if (n == 0) throw BadInput("budget", s, "must be > 0");
  if (unit == 's') b.seconds = double(n);
  else if (unit == 'm') b.seconds = 60.0 * double(n);
  else if (unit == 'h') b.seconds = 3600.0 * double(n);
  else b.cases = n;
  return b;
}

std::pair<int, int> parse_shard(const std::string& s) {
  const auto slash = s.find('/');
  auto bad = [&](const std::string& why) { return BadInput("shard", s, why); };
  if (slash == std::string::npos) throw bad("must be i/n, e.g. 0/4");
  const std::string a = s.substr(0, slash), b = s.substr(slash + 1);
  for (const auto& x : {a, b})
    if (x.empty() || x.find_first_not_of("0123456789") != std::string::npos)
      throw bad("must be i/n with non-negative integers, e.g. 0/4");
  constexpr int kMaxShards = 999999;  // i and n as int; more shards than cases a campaign runs is pointless
  auto num = [&](const std::string& x) {
    const size_t nz = std::min(x.find_first_not_of('0'), x.size() - 1);
    if (x.size() - nz > 6) throw bad(fmt::format("n must be at most {} (and i < n)", kMaxShards));
    return std::stoi(x.substr(nz));
  };
  const int i = num(a), n = num(b);
  if (n < 1 || i >= n) throw bad(fmt::format("needs 0 <= i < n, got i={} n={}", i, n));
  return {i, n};
}

}  // namespace ao

// CP partition formulas (layout.cpp) against brute-force enumeration: every document position of a
// (padded) pack is cut into 2*cp chunks (zigzag: rank r owns chunks r and 2cp-1-r) or cp chunks
// (contiguous: rank r owns chunk r), enumerated one position at a time, and compared with the
// Layout's segments (pos0, rows, valid, row0) and per-row helpers; over all ranks every document
// position must be held exactly once.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "attn_oracle/layout/layout.h"

using namespace ao;

namespace {

struct Held {  // what brute force says a local Q row of a rank holds
  int doc;
  int chunk;
  int64_t pos;
  bool valid;
};

// Brute force for one rank: walk every position of every document's padded span in order.
std::map<int64_t, Held> enumerate(const std::vector<int64_t>& valid_len, const std::vector<int64_t>& padded, int cp,
                                  int rank, bool zigzag) {
  std::map<int64_t, Held> out;
  int64_t global = 0;  // global Q row of the document's first row (packed padded lengths)
  for (size_t b = 0; b < padded.size(); ++b) {
    const int64_t P = padded[b];
    const int64_t nchunks = zigzag ? 2 * cp : cp;
    const int64_t clen = P / nchunks;
    // Positions in the order this rank stores them: its chunks in ascending order of local slot.
    std::vector<std::pair<int, int64_t>> mine;  // (chunk, pos)
    for (int64_t p = 0; p < P; ++p) {
      const int chunk = int(p / clen);
      const int owner = zigzag ? (chunk < cp ? chunk : int(2 * cp - 1 - chunk)) : chunk;
      if (owner == rank) mine.push_back({chunk, p});
    }
    // Zigzag: the front chunk (r) comes first in the local buffer, the back chunk (2cp-1-r) after it;
    // positions ascend inside each chunk and the front chunk precedes the back one, so the
    // ascending enumeration is already the storage order.
    int64_t local = global / cp;
    for (auto [chunk, p] : mine) out[local++] = {int(b), chunk, p, p < valid_len[b]};
    global += P;
  }
  return out;
}

void check(const std::vector<int64_t>& L, const std::vector<int64_t>& pad, int cp, bool zigzag) {
  std::vector<int64_t> P;
  std::string docs, pads;
  for (size_t b = 0; b < L.size(); ++b) {
    P.push_back(L[b] + pad[b]);
    docs += fmt::format("{}{}", b ? "," : "", L[b]);
    pads += fmt::format("{}{}", b ? "," : "", pad[b]);
  }
  // Every (doc, position) of the padded pack, counted over all ranks.
  std::map<std::pair<int, int64_t>, int> seen;
  for (int rank = 0; rank < cp; ++rank) {
    const std::string line = fmt::format("op=indexer heads=1 dim=4 topk=4 docs={} q_pad={} cp={} rank={}{}", docs,
                                         pads, cp, rank, zigzag || cp == 1 ? "" : " cp_scheme=contiguous");
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    if (cp == 1) {
      // No CP: one segment per document, its valid rows only, positions from 0 (top-left/q == kv).
      ASSERT_EQ(l.segments.size(), L.size());
      int64_t off = 0;
      for (size_t b = 0; b < L.size(); ++b) {
        const auto& s = l.segments[b];
        EXPECT_EQ(s.doc, int(b));
        EXPECT_EQ(s.row0, off);
        EXPECT_EQ(s.pos0, 0);
        EXPECT_EQ(s.rows, L[b]);
        EXPECT_EQ(s.valid, L[b]);
        for (int64_t i = 0; i < L[b]; ++i) ++seen[{int(b), i}];
        off += P[b];
      }
      continue;
    }
    const auto held = enumerate(L, P, cp, rank, zigzag);
    int64_t total = 0;
    for (int64_t x : P) total += x;
    ASSERT_EQ(l.q_rows, total / cp);
    ASSERT_EQ(int64_t(held.size()), total / cp);  // brute force: a rank holds 1/cp of the rows
    // Segments: each is a run of consecutive held rows of one chunk; compare every field.
    ASSERT_EQ(l.segments.size(), L.size() * (zigzag ? 2 : 1));
    for (const auto& s : l.segments) {
      ASSERT_GT(s.rows, 0);
      const auto first = held.at(s.row0);
      EXPECT_EQ(s.doc, first.doc);
      EXPECT_EQ(s.chunk, first.chunk);
      EXPECT_EQ(s.pos0, first.pos);
      int64_t rows = 0, valid = 0;
      for (auto it = held.find(s.row0); it != held.end() && it->second.doc == s.doc && it->second.chunk == s.chunk;
           ++it) {
        EXPECT_EQ(it->second.pos, s.pos0 + rows) << "row " << it->first;
        ++rows;
        valid += it->second.valid;
      }
      EXPECT_EQ(s.rows, rows) << "doc " << s.doc << " chunk " << s.chunk;
      EXPECT_EQ(s.valid, valid) << "doc " << s.doc << " chunk " << s.chunk;
      // The valid rows are a prefix of the chunk (padding sits at a document's tail).
      for (int64_t i = 0; i < s.rows; ++i) EXPECT_EQ(held.at(s.row0 + i).valid, i < s.valid);
    }
    for (const auto& [row, h] : held) {
      ASSERT_GE(l.row_segment[size_t(row)], 0) << "row " << row;
      EXPECT_EQ(l.pos_of(row), h.pos) << "row " << row;
      EXPECT_EQ(l.valid_row(row), h.valid) << "row " << row;
      EXPECT_EQ(l.seg_of(row).doc, h.doc) << "row " << row;
      ++seen[{h.doc, h.pos}];
    }
  }
  // Union over ranks: every position of every (padded) document exactly once.
  for (size_t b = 0; b < L.size(); ++b) {
    const int64_t span = cp == 1 ? L[b] : P[b];
    for (int64_t p = 0; p < span; ++p) {
      auto it = seen.find({int(b), p});
      ASSERT_TRUE(it != seen.end()) << "doc " << b << " position " << p << " is held by no rank";
      ASSERT_EQ(it->second, 1) << "doc " << b << " position " << p;
    }
  }
  size_t expect = 0;
  for (size_t b = 0; b < L.size(); ++b) expect += size_t(cp == 1 ? L[b] : P[b]);
  EXPECT_EQ(seen.size(), expect);
}

TEST(Zigzag, MatchesBruteForceEnumeration) {
  std::mt19937_64 rng(20261202);
  for (int cp : {1, 2, 3, 4, 8, 32}) {
    for (bool zigzag : {true, false}) {
      const int64_t parts = zigzag ? 2 * cp : cp;
      for (int trial = 0; trial < 6; ++trial) {
        const int B = 1 + int(rng() % 4);
        std::vector<int64_t> L, pad;
        for (int b = 0; b < B; ++b) {
          int64_t len;
          switch (trial % 3) {
            case 0: len = parts * int64_t(1 + rng() % 6); break;           // exact multiples
            case 1: len = int64_t(rng() % uint64_t(5 * parts + 1)); break;  // padded up (incl. 0)
            default: len = int64_t(rng() % uint64_t(parts)); break;         // shorter than one chunk row set
          }
          int64_t p = (parts - len % parts) % parts;
          if (trial % 3 != 0 && rng() % 3 == 0) p += parts * int64_t(1 + rng() % 2);  // whole padding chunks
          if (len + p == 0) p = parts;
          L.push_back(len);
          pad.push_back(p);
        }
        ASSERT_NO_FATAL_FAILURE(check(L, pad, cp, zigzag));
      }
    }
  }
}

TEST(Zigzag, SeedCp32Rank31MultiDoc) {
  // docs=65536,65536 cp=32 rank=31: chunks 31 and 32 of each document, 1024 rows each.
  const Layout l = make_layout(parse_case("op=indexer docs=65536,65536 cp=32 rank=31 heads=1 dim=4 topk=4"));
  ASSERT_EQ(l.segments.size(), 4u);
  const int64_t c = 65536 / 64;
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(l.segments[size_t(2 * b)].pos0, 31 * c);
    EXPECT_EQ(l.segments[size_t(2 * b + 1)].pos0, 32 * c);
    EXPECT_EQ(l.segments[size_t(2 * b)].row0, b * 2 * c);
    EXPECT_EQ(l.segments[size_t(2 * b + 1)].row0, b * 2 * c + c);
  }
}

TEST(Zigzag, CropKeyExtentIsTheChunkEnd) {
  // crop=1: the kernel sees keys [0, pos0 + rows) of the document (the crop= key, docs/reference/case-keys.md), else all kv.
  for (int crop : {0, 1}) {
    const Layout l = make_layout(parse_case(fmt::format("op=indexer docs=64,32 cp=2 rank=1 crop={}", crop)));
    for (const auto& s : l.segments) {
      const int64_t kv = l.docs[size_t(s.doc)].kv_len;
      EXPECT_EQ(s.key_len, crop ? std::min(kv, s.pos0 + s.rows) : kv);
    }
  }
}

}  // namespace

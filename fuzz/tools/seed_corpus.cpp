// Writes the seed corpus of fuzz_differential: the campaign's first N cases at tiny dims (seed S),
// each as the input bytes whose decisions replay it through FdpChoices (format byte 2, then
// fdp_bytes of the recorded choices), named by the case's FNV hash. Usage: seed_corpus DIR [N] [S].
// Built on demand: cmake --build build --target fuzz_differential_seed_corpus
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "attn_oracle/fuzz/found_file.h"
#include "attn_oracle/fuzz/generator.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [N] [SEED]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const uint64_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 300;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  ao::GenOptions opt;
  opt.dims = ao::DimsProfile::Tiny;
  for (uint64_t i = 0; i < n; ++i) {
    ao::RandomChoices src(seed, i);
    const ao::Case c = ao::generate_case(src, opt);
    std::string bytes(1, char(2));  // fuzz_differential's format version
    for (uint8_t b : ao::fdp_bytes(src.record())) bytes += char(b);
    std::ofstream(dir + "/" + ao::case_hash(ao::print_case(c)), std::ios::binary) << bytes;
  }
  return 0;
}

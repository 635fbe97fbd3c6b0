// data.h — seeded synthetic token sequences with a learnable signal.
//
// Every sequence follows a fixed random permutation of the vocabulary: x[0] is uniform and
// x[i + 1] = perm[x[i]], except that with probability `noise` it is uniform instead. A model
// can learn to predict the next token from the current one, so the loss falls from ln(vocab)
// towards the noise floor. Every number is a pure function of (seed, step, microbatch, position),
// so any rank can regenerate any microbatch (the last stage makes its own labels).
//
//   SyntheticData data({.vocab = 128, .seq_len = 64, .micro_batch = 2, .seed = 7});
//   std::vector<std::int32_t> tokens(data.tokens_per_microbatch()), labels(tokens.size());
//   data.Fill(/*step=*/0, /*microbatch=*/3, tokens, labels);   // labels[i] = next token
//
// With data parallelism, give each replica its own microbatch numbers (e.g. dp_rank * m + mb)
// so the single-process reference sees the same data as the union of the replicas.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pipetwin::gpt {

struct SyntheticDataConfig {
  int vocab = 128;
  int seq_len = 64;
  int micro_batch = 2;
  std::uint64_t seed = 1;
  float noise = 0.0f;
};

class SyntheticData {
 public:
  explicit SyntheticData(const SyntheticDataConfig& cfg);
  std::size_t tokens_per_microbatch() const;
  // tokens and labels: [micro_batch, seq_len], b-major; labels are the tokens shifted by one.
  void Fill(std::int64_t step, std::int64_t microbatch, std::span<std::int32_t> tokens,
            std::span<std::int32_t> labels) const;
  const std::vector<std::int32_t>& permutation() const { return perm_; }

 private:
  SyntheticDataConfig cfg_;
  std::vector<std::int32_t> perm_;
};

}  // namespace pipetwin::gpt

#include "exec/model/data.h"

#include <cassert>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "exec/model/params.h"

namespace pipetwin::gpt {

namespace {

// Uniform integer in [0, n) from a 64-bit key (n is small; the modulo bias is negligible).
std::int32_t UniformFromKey(std::uint64_t key, std::int32_t n) {
  return static_cast<std::int32_t>(Mix64(key) % static_cast<std::uint64_t>(n));
}

double Unit(std::uint64_t key) { return static_cast<double>(Mix64(key) >> 11) * 0x1.0p-53; }

}  // namespace

SyntheticData::SyntheticData(const SyntheticDataConfig& cfg) : cfg_(cfg) {
  if (cfg.vocab < 2 || cfg.seq_len < 1 || cfg.micro_batch < 1) {
    throw std::invalid_argument("synthetic data: vocab >= 2, seq_len >= 1, micro_batch >= 1");
  }
  perm_.resize(static_cast<std::size_t>(cfg.vocab));
  std::iota(perm_.begin(), perm_.end(), 0);
  std::uint64_t key = Mix64(cfg.seed ^ 0x7065726d75746531ULL);
  for (std::size_t i = perm_.size() - 1; i > 0; --i) {  // Fisher-Yates
    key = Mix64(key);
    const auto j = static_cast<std::size_t>(key % (i + 1));
    std::swap(perm_[i], perm_[j]);
  }
}

std::size_t SyntheticData::tokens_per_microbatch() const {
  return static_cast<std::size_t>(cfg_.micro_batch) * static_cast<std::size_t>(cfg_.seq_len);
}

void SyntheticData::Fill(std::int64_t step, std::int64_t microbatch, std::span<std::int32_t> tokens,
                         std::span<std::int32_t> labels) const {
  if (tokens.size() != tokens_per_microbatch() || labels.size() != tokens_per_microbatch()) {
    throw std::invalid_argument("synthetic data: tokens and labels need micro_batch * seq_len");
  }
  const auto s = static_cast<std::size_t>(cfg_.seq_len);
  for (std::size_t b = 0; b < static_cast<std::size_t>(cfg_.micro_batch); ++b) {
    const std::uint64_t seq_key = Mix64(Mix64(Mix64(cfg_.seed) ^ static_cast<std::uint64_t>(step)) ^
                                        static_cast<std::uint64_t>(microbatch)) ^
                                  static_cast<std::uint64_t>(b) * 0x9e3779b97f4a7c15ULL;
    std::int32_t x = UniformFromKey(seq_key, cfg_.vocab);
    for (std::size_t t = 0; t <= s; ++t) {
      if (t < s) tokens[b * s + t] = x;
      if (t > 0) labels[b * s + t - 1] = x;
      const std::uint64_t k = seq_key + 2 * (t + 1);
      if (cfg_.noise > 0.0f && Unit(k) < static_cast<double>(cfg_.noise)) {
        x = UniformFromKey(k + 1, cfg_.vocab);
      } else {
        x = perm_[static_cast<std::size_t>(x)];
      }
    }
  }
}

}  // namespace pipetwin::gpt

#include "exec/model/memory.h"

#include <cassert>

namespace pipetwin::gpt {

std::string_view ToString(MemCategory c) {
  switch (c) {
    case MemCategory::kParams:
      return "params";
    case MemCategory::kGrads:
      return "grads";
    case MemCategory::kOptimizer:
      return "optimizer";
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kComm:
      return "comm";
    case MemCategory::kWorkspace:
      return "workspace";
    case MemCategory::kSending:
      return "sending";
  }
  return "?";
}

void Accountant::Add(MemCategory c, std::size_t bytes) {
  const std::size_t s = Slot(c);
  current_[s] += bytes;
  total_ += bytes;
  peak_[s] = std::max(peak_[s], current_[s]);
  peak_total_ = std::max(peak_total_, total_);
  if (Accounted(c)) {
    accounted_ += bytes;
    peak_accounted_ = std::max(peak_accounted_, accounted_);
  }
}

void Accountant::Remove(MemCategory c, std::size_t bytes) {
  const std::size_t s = Slot(c);
  assert(current_[s] >= bytes);
  current_[s] -= bytes;
  total_ -= bytes;
  if (Accounted(c)) accounted_ -= bytes;
}

void Accountant::ResetPeaks() {
  peak_ = current_;
  peak_total_ = total_;
  peak_accounted_ = accounted_;
}

}  // namespace pipetwin::gpt

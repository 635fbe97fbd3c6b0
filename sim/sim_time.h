// sim_time.h — simulated time: a strong integer type in nanoseconds.
//
// No implicit conversion from double: costs given in milliseconds are rounded to the nearest
// nanosecond once, when the cost table is built, so the simulation itself is exact integer
// arithmetic and gives the same answer on every run and every machine.
//
//   SimTime t = SimTime::FromMillis(1.5);   // 1'500'000 ns
//   t += SimTime::FromNanos(10);
//   double ms = t.ToMillis();
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>

namespace pipetwin {

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime FromNanos(std::int64_t ns) { return SimTime(ns); }
  static SimTime FromMillis(double ms) { return SimTime(std::llround(ms * 1e6)); }
  static SimTime FromMicros(double us) { return SimTime(std::llround(us * 1e3)); }

  constexpr std::int64_t nanos() const { return ns_; }
  double ToMillis() const { return static_cast<double>(ns_) * 1e-6; }

  constexpr SimTime& operator+=(SimTime o) {
    ns_ += o.ns_;
    return *this;
  }
  friend constexpr SimTime operator+(SimTime a, SimTime b) { return SimTime(a.ns_ + b.ns_); }
  friend constexpr SimTime operator-(SimTime a, SimTime b) { return SimTime(a.ns_ - b.ns_); }
  friend constexpr auto operator<=>(SimTime, SimTime) = default;
  friend constexpr SimTime Max(SimTime a, SimTime b) { return a < b ? b : a; }

 private:
  constexpr explicit SimTime(std::int64_t ns) : ns_(ns) {}
  std::int64_t ns_ = 0;
};

}  // namespace pipetwin

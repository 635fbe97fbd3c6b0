// generators.h — the registry of schedule generators.
//
// Each schedule is one pure function of (pp, vpp, microbatches) in its own file
// (gen_<name>.cc) that emits compute actions only. FindGenerator looks one up by the name
// used in the job file's `schedule:` key.
//
//   const GeneratorInfo* g = FindGenerator("zb-h1");
//   Expected<Schedule> s = g->generate({.pp = 4, .vpp = 1, .microbatches = 8});
#pragma once

#include <span>
#include <string_view>

#include "schedule/schedule.h"

namespace pipetwin {

struct GeneratorParams {
  int pp = 1;            // pipeline ranks
  int vpp = 1;           // chunks per rank (interleaved-1f1b only; zbv and dualpipev use 2)
  int microbatches = 1;  // m
};

using GenerateFn = Expected<Schedule> (*)(const GeneratorParams&);

struct GeneratorInfo {
  std::string_view name;
  std::string_view description;
  GenerateFn generate;
  bool splits_backward;  // emits I and W instead of B
};

// All generators, in the order `pipetwin --help` lists them.
std::span<const GeneratorInfo> AllGenerators();
const GeneratorInfo* FindGenerator(std::string_view name);

// The generators (one file each).
Expected<Schedule> GenerateGpipe(const GeneratorParams& p);
Expected<Schedule> Generate1F1B(const GeneratorParams& p);
Expected<Schedule> GenerateInterleaved1F1B(const GeneratorParams& p);
Expected<Schedule> GenerateZbH1(const GeneratorParams& p);
Expected<Schedule> GenerateZbH2(const GeneratorParams& p);
Expected<Schedule> GenerateZbv(const GeneratorParams& p);
Expected<Schedule> GenerateDualPipeV(const GeneratorParams& p);

// Shared by the generators: an empty schedule with placement set and checks on p done.
Expected<Schedule> NewSchedule(std::string_view name, const GeneratorParams& p, int chunks,
                               bool v_shape);

}  // namespace pipetwin

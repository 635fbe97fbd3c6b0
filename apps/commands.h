// commands.h — the subcommands of `pipetwin`; main.cc dispatches to them. Each parses its
// arguments (apps/cli.h) and calls a library function; argv[1] is the subcommand's name.
//
//   if (cmd == "compare") return CmdCompare(argc, argv);
#pragma once

namespace pipetwin {

int CmdSimulate(int argc, char** argv);   // cmd_simulate.cc
int CmdSchedule(int argc, char** argv);   // cmd_simulate.cc
int CmdSchedules(int argc, char** argv);  // cmd_simulate.cc
int CmdPresets(int argc, char** argv);    // cmd_simulate.cc
int CmdRun(int argc, char** argv);        // cmd_run.cc, under mpirun
int CmdCalibrate(int argc, char** argv);  // cmd_calibrate.cc, under mpirun
int CmdCompare(int argc, char** argv);    // cmd_compare.cc
int CmdValidate(int argc, char** argv);   // cmd_validate.cc

}  // namespace pipetwin

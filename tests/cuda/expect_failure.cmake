# cmake -DCOMMAND="a;b;c" -DEXPECT_RC=1 -DEXPECT_REGEX=... -P expect_failure.cmake
# Runs COMMAND and checks both its exit status and that its output matches EXPECT_REGEX.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}'")
endif()

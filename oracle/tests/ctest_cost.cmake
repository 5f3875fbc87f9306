# Read by CTest after the discovered gtests are added (TEST_INCLUDE_FILES, oracle/tests/CMakeLists.txt): the
# costs of the longest tests, so that a fresh build's first `ctest -jN` (no timing history yet) starts them
# first and runs the short ones beside them, instead of finishing on one long test with the other cores idle.
# Later runs use CTest's own record of each test's time.
set_tests_properties(Selftest.BuiltInMatrixDetectsAndDiagnosesEveryObservableBug PROPERTIES COST 600)
set_tests_properties(Vacuity.NoCorpusCaseAcceptsAZeroOrNanAnswer PROPERTIES COST 300)

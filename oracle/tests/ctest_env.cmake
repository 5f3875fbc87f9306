# Read by CTest before it runs any test (TEST_INCLUDE_FILES, top-level CMakeLists.txt): the environment
# every test inherits. `ctest -jN` runs N tests side by side; a test's OpenMP teams would add threads on
# top, and libgomp's threads spin at barriers, so two 2-thread tests on 2 cores spent most of their time
# spinning (a 1.9 s test took 4.6-6.3 s at 2 threads on a busy machine, a pair of them 11.6 s against
# 2.5 s at 1 thread). Tests that need several threads set them themselves (omp_set_num_threads, or the
# variable in a child's environment); a value the caller set is kept.
if(NOT DEFINED ENV{OMP_NUM_THREADS})
  set(ENV{OMP_NUM_THREADS} 1)
endif()
if(NOT DEFINED ENV{OMP_WAIT_POLICY})
  set(ENV{OMP_WAIT_POLICY} passive)
endif()

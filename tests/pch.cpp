// The anchor of the tests' precompiled headers (tests/CMakeLists.txt: llmrt_test_pch).

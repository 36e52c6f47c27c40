# The README's example is examples/quickstart.cpp verbatim (so the tests build and run it).
file(READ ${SOURCE_DIR}/README.md readme)
file(READ ${SOURCE_DIR}/examples/quickstart.cpp example)
string(FIND "${readme}" "${example}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain examples/quickstart.cpp verbatim")
endif()

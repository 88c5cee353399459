# `cmake --install` into a temporary prefix, then two outside consumers of
# what it put there: a C program built with pkg-config's flags, and a CMake
# project that finds the package (find_package(cgram) → cgram::cgram), and
# Python importing the installed package.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=tests/api/install -DWORK=dir -DC_COMPILER=cc
#         -DVERSION=x.y.z -DLIBDIR=lib [-DPYTHON=python3 -DPYTHON_DIR=lib/python3.X/dist-packages]
#         -P install_test.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(prefix ${WORK}/prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${what}: exit ${code}\n${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

function(expect_output what text)
  string(FIND "${out}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: the output lacks '${text}':\n${out}")
  endif()
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file include/cgram.h include/cgram.hpp ${LIBDIR}/libcgram.so bin/cgram ${LIBDIR}/pkgconfig/cgram.pc
        ${LIBDIR}/cmake/cgram/cgramConfig.cmake ${LIBDIR}/cmake/cgram/cgramConfigVersion.cmake
        ${LIBDIR}/cmake/cgram/cgramTargets.cmake)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "cmake --install did not install ${file}")
  endif()
endforeach()

# The installed command works from its new place.
run("cgram check" ${prefix}/bin/cgram check ${SOURCE_DIR}/../../../examples/json.cgram)
expect_output("cgram check" "ok")

# C, with pkg-config (the .pc file finds its prefix from its own place).
run("pkg-config" ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig
    pkg-config --cflags --libs cgram)
string(STRIP "${out}" flags)
expect_output("pkg-config" "-lcgram")
separate_arguments(flags UNIX_COMMAND "${flags}")
run("cc consumer.c" ${C_COMPILER} -std=c11 -Wall -Wextra -pedantic -Werror ${SOURCE_DIR}/consumer.c ${flags}
    -Wl,-rpath,${prefix}/${LIBDIR} -o ${WORK}/c_consumer)
run("c_consumer" ${WORK}/c_consumer)
expect_output("c_consumer" "cgram ${VERSION} (ABI")

# C++ (the C++ API, cgram.hpp, as C++17), with find_package(cgram) in a project of its own.
run("cmake (consumer)" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/cxx -B ${WORK}/cxx-build -G Ninja
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("cmake --build (consumer)" ${CMAKE_COMMAND} --build ${WORK}/cxx-build)
run("consumer" ${WORK}/cxx-build/consumer)
expect_output("consumer" "cgram ${VERSION} (ABI")
expect_output("consumer" "bundled vocabulary: 32064 tokens")
expect_output("consumer" "broken grammar: CGRAM_ERROR_GRAMMAR")

# Python: the installed package imports from its place, with nothing from the
# build tree (no ';' in the code: CMake would split the argument there).
if(PYTHON)
  run("python import" ${CMAKE_COMMAND} -E env PYTHONPATH=${prefix}/${PYTHON_DIR} ${PYTHON} -c
      "import cgram, cgram.logits\nm = cgram.Matcher(cgram.compile(cgram.Grammar.from_gbnf('root ::= [0-9]+')))\nprint(cgram.__file__, m.is_allowed(m.grammar.vocab.encode('7', continuation=True)[0]))")
  expect_output("python import" "${prefix}/${PYTHON_DIR}/cgram/__init__.py True")
endif()
message(STATUS "installed into ${prefix}; the consumers built and ran")

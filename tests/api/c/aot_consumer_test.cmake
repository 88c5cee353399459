# examples/aot_consumer end to end: `cgram compile` writes the object, the C
# program loads it with the bundled vocabulary and walks a document's tokens.
#   cmake -DCGRAM=... -DCONSUMER=... -DGRAMMAR=json.cgram -DWORK=dir -P aot_consumer_test.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(object ${WORK}/json.so)

execute_process(COMMAND ${CGRAM} compile ${GRAMMAR} -o ${object} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "cgram compile: exit ${code}\n${out}\n${err}")
endif()

# Runs the consumer on an object, a vocabulary ("" for the bundled one: quoted
# here, since CMake drops empty list items) and token ids; the exit code and
# a piece of the output must be as expected.
function(expect_consumer expected_code expected_output object vocab)
  execute_process(COMMAND ${CONSUMER} ${object} "${vocab}" ${ARGN}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL expected_code)
    message(FATAL_ERROR "aot_consumer ${object} \"${vocab}\" ${ARGN}: exit ${code}, expected ${expected_code}\n${out}\n${err}")
  endif()
  string(FIND "${out}${err}" "${expected_output}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "aot_consumer ${object} \"${vocab}\" ${ARGN}: output lacks '${expected_output}':\n${out}\n${err}")
  endif()
  message(STATUS "aot_consumer ${object} \"${vocab}\" ${ARGN}:\n${out}${err}")
endfunction()

# {"a": [1, 2]} in the bundled Phi-3 vocabulary: {" a ": ␣[ 1 , ␣ 2 ]}
set(doc 6377 29874 1115 518 29896 29892 29871 29906 12258)
expect_consumer(0 "tier aot" ${object} "" ${doc})
expect_consumer(0 "can end: yes" ${object} "" ${doc})
# Before the 1: an array element or ']' may come, not the end.
expect_consumer(0 "can end: no" ${object} "" 6377 29874 1115 518)
# 32000 is the end of sequence.
expect_consumer(0 "can end: ended" ${object} "" ${doc} 32000)
# 'a' after the closing brace.
expect_consumer(1 "token 29874 rejected" ${object} "" ${doc} 29874)
expect_consumer(1 "not in the vocabulary" ${object} "" 4000000000)
expect_consumer(2 "not a cgram object" ${GRAMMAR} "")
expect_consumer(2 "cannot read vocabulary" ${object} ${WORK}/missing-tokenizer.json 6377)
execute_process(COMMAND ${CONSUMER} ${object} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 64)
  message(FATAL_ERROR "aot_consumer with no vocabulary: exit ${code}, expected 64\n${out}\n${err}")
endif()

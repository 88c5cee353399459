# End-to-end checks of the cgram command: exit codes and key output.
file(MAKE_DIRECTORY ${WORK})

# (A timeout, so that a command that blocks, on a FIFO say, fails the test.)
function(expect_run expected_code expected_output)
  execute_process(COMMAND ${CGRAM} ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT code EQUAL expected_code)
    message(FATAL_ERROR "cgram ${ARGN}: exit ${code}, expected ${expected_code}\n${out}\n${err}")
  endif()
  string(FIND "${out}${err}" "${expected_output}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "cgram ${ARGN}: output lacks '${expected_output}':\n${out}\n${err}")
  endif()
endfunction()

# The same, and the output must not hold `unexpected`.
function(expect_run_lacks expected_code expected_output unexpected)
  expect_run(${expected_code} "${expected_output}" ${ARGN})
  execute_process(COMMAND ${CGRAM} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(FIND "${out}${err}" "${unexpected}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "cgram ${ARGN}: output holds '${unexpected}':\n${out}\n${err}")
  endif()
endfunction()

set(json ${EXAMPLES}/json.cgram)
expect_run(0 "json.cgram: ok: 9 rules" check ${json})
expect_run(0 "\"ok\": true" check ${json} --json)
# (No square brackets in arguments: CMake lists do not split inside them.)
expect_run(0 "complete" match ${json} "{\"a\": {\"b\": 2}}")
expect_run(1 "prefix" match ${json} "{\"a\": 1,")
expect_run(2 "rejected at byte 9 (line 1, column 10)" match ${json} "{\"a\": 1, }")
expect_run(2 "\"offset\": 9" match ${json} "{\"a\": 1, }" --json)
expect_run(0 "complete" match ${EXAMPLES}/arithmetic.cgram -- "-1 + 2")
expect_run(0 "complete" match ${json} "123" --start value)

file(WRITE ${WORK}/doc.json "{\"k\": \n  [true]}\n")
expect_run(0 "complete" match ${json} --file ${WORK}/doc.json)
file(WRITE ${WORK}/bad.json "{\"k\": \n  [tru]}")
expect_run(2 "line 2, column 7" match ${json} --file ${WORK}/bad.json)

file(WRITE ${WORK}/broken.cgram "start ::= vaule;\nvalue ::= 'v';\n")
expect_run(1 "broken.cgram:1:11: error: undefined rule 'vaule'; did you mean 'value'?" check ${WORK}/broken.cgram)
expect_run(1 "\"line\": 1" check ${WORK}/broken.cgram --json)
expect_run(3 "undefined rule" match ${WORK}/broken.cgram "v")
expect_run(1 "cannot read" check ${WORK}/missing.cgram)
expect_run(3 "cannot read" match ${WORK}/missing.cgram "x")

expect_run(0 "Usage" --help)
expect_run(0 "Exit status: 0 complete" match --help)
expect_run(64 "expected the text to match" match ${json})
expect_run(64 "FILE is required" check)
expect_run(64 "unknown command 'frobnicate'; the commands are: check, match, mask, generate, bench, compile, convert, schema, tools, gpu, vocab, demo"
           frobnicate)
expect_run(64 "expected a command: check, match" )

# Token ids as input: mask and bench take them directly.
file(WRITE ${WORK}/string.cgram "start ::= #'\"[a-z]*\"' ;\n")
file(WRITE ${WORK}/ids.txt "29908\n")
expect_run(0 "after 1 prefix tokens" mask ${WORK}/string.cgram --tokens ${WORK}/ids.txt)
file(WRITE ${WORK}/bad_ids.txt "29908 12x\n")
expect_run(3 "bad_ids.txt:1: '12x' is not a token id of this vocabulary" mask ${WORK}/string.cgram --tokens ${WORK}/bad_ids.txt)
file(WRITE ${WORK}/big_ids.txt "4294967296\n")
expect_run(3 "is not a token id of this vocabulary (0 to 32063)" mask ${WORK}/string.cgram --tokens ${WORK}/big_ids.txt)
expect_run(0 "1 documents" bench ${WORK}/string.cgram --tokens ${WORK}/ids.txt)
expect_run(64 "give --docs PATH, --tokens FILE or --walks N" bench ${WORK}/string.cgram)
# --walks: random walks instead of documents, timed as they are made; the
# slowest steps name the walk and show its text.
expect_run(0 "3 documents" bench ${EXAMPLES}/json.cgram --walks 3 --walk-tokens 40 --prefer-long)
# Every bench states its floor (one OR of a full-vocabulary bitset, measured in the same run) and the masks in it.
expect_run(0 "floor (one OR of a full 32064-token bitset, this machine, now): " bench ${EXAMPLES}/json.cgram --walks 2 --walk-tokens 20)
expect_run(0 "\"mask_floors\": {" bench ${EXAMPLES}/json.cgram --walks 2 --walk-tokens 20 --json)
expect_run(0 "walk 2 (seed 5) step" bench ${EXAMPLES}/json.cgram --walks 2 --walk-tokens 40 --seed 5 --slowest 100)
expect_run(0 "2 documents" bench ${EXAMPLES}/record.cgram --canonical --walks 2 --walk-tokens 30 --prefer-long)
# cgram vocab build: the canonical context saved, found after by fingerprint.
set(phi3 ${EXAMPLES}/../frontend/vocab/bundled/ggml-vocab-phi-3.gguf)
expect_run(0 "loads in" vocab build ${phi3} -o ${WORK}/phi3.cgvocab)
expect_run(64 "CGRAM_VOCAB_DIR" vocab build ${phi3})
expect_run(3 "vocabulary" vocab build ${WORK}/missing.json -o ${WORK}/x.cgvocab)
expect_run(64 "--walks times one grammar over its documents, not --suite" bench --suite ${EXAMPLES}/../bench/suite --walks 2)
file(WRITE ${WORK}/prefix.txt "\"ab")
expect_run(0 "after 2 prefix tokens" mask ${WORK}/string.cgram --prefix-file ${WORK}/prefix.txt)

# --json output is valid UTF-8 whatever the bytes: a byte outside a valid
# character is written \xHH (backslashes doubled) and "<key>_escaped": true.
string(ASCII 255 byte_ff)
expect_run(1 "\"message\": \"no rule named '\\\\xFF', the start rule" check ${json} --start "${byte_ff}" --json)
expect_run(1 "\"message_escaped\": true" check ${json} --start "${byte_ff}" --json)
file(WRITE "${WORK}/bad${byte_ff}name.cgram" "start ::= 'a';\n")
expect_run(0 "\"file\": \"${WORK}/bad\\\\xFFname.cgram\"" check "${WORK}/bad${byte_ff}name.cgram" --json)
expect_run(1 "\"error\":\"cannot read grammar '${WORK}/gone\\\\xFF.cgram'" check "${WORK}/gone${byte_ff}.cgram" --json)
# A generation cut inside a character (U+10348 is four byte tokens in Phi-3).
file(WRITE ${WORK}/gothic.cgram "start ::= '\\u{10348}' ;\n")
expect_run(0 "\"stop\":\"max_tokens\",\"text\":\"\\\\xF0\",\"text_escaped\":true,\"tokens\":[243]}"
           generate ${WORK}/gothic.cgram --json --max-tokens 1)

# Grammars and texts: only regular files, read up to a limit (the size check
# comes first, and never more than limit + 1 bytes are read).
expect_run(1 "cannot read grammar '/dev/zero': it is a character device, not a regular file" check /dev/zero)
expect_run(64 "cannot read text '/dev/zero': it is a character device" match ${json} --file /dev/zero)
expect_run(1 "cannot read grammar '${WORK}': it is a directory" check ${WORK})
expect_run(3 "cannot read grammar '${WORK}': it is a directory" match ${WORK} "x")
expect_run(64 "cannot read text '${WORK}': it is a directory" match ${json} --file ${WORK})
expect_run(3 "cannot read grammar '${WORK}': it is a directory" generate ${WORK})
expect_run(3 "cannot read prefix file '${WORK}': it is a directory" mask ${json} --prefix-file ${WORK})
expect_run(3 "cannot read token id file '${WORK}': it is a directory" mask ${json} --tokens ${WORK})
find_program(MKFIFO mkfifo)
if(MKFIFO)
  file(REMOVE ${WORK}/fifo.cgram)
  execute_process(COMMAND ${MKFIFO} ${WORK}/fifo.cgram)
  expect_run(1 "cannot read grammar '${WORK}/fifo.cgram': it is a FIFO, not a regular file" check ${WORK}/fifo.cgram)
  expect_run(64 "it is a FIFO" match ${json} --file ${WORK}/fifo.cgram)
endif()
# /proc files say they hold 0 bytes: read as they are, never "2^63 bytes".
if(EXISTS /proc/self/status)
  expect_run_lacks(1 "/proc/self/status:1:" "9223372036854775807" check /proc/self/status)
endif()
file(WRITE ${WORK}/ten.json "1234567890")
expect_run(0 "complete" match ${json} --file ${WORK}/ten.json --max-text-bytes 10)
expect_run(64 "text '${WORK}/ten.json' is 10 bytes; the limit is 9 bytes" match ${json} --file ${WORK}/ten.json
           --max-text-bytes 9)
expect_run(3 "is 10 bytes; the limit is 9 bytes" bench ${json} --docs ${WORK}/ten.json --max-text-bytes 9)
expect_run(64 "--max-text-bytes: 'x' is not a whole number" match ${json} --file ${WORK}/ten.json --max-text-bytes x)

# Whole numbers are checked as written: no wrap-around, no clamping.
expect_run(64 "--seed: '-1' is not a whole number (expected 0 to 18446744073709551615)" generate ${json} --seed -1)
expect_run(64 "--seed: 18446744073709551616 is out of range" generate ${json} --seed 18446744073709551616)
expect_run(64 "--seed: '1e23' is not a whole number" generate ${json} --seed 1e23)
expect_run(0 "" generate ${json} --seed 18446744073709551615 --max-tokens 2)
expect_run(64 "--max-tokens: '-1' is not a whole number (expected 1 to 100000000)" generate ${json} --max-tokens -1)
expect_run(64 "--max-tokens: 0 is out of range" generate ${json} --max-tokens 0)
# Sampling like a corpus (the main job's demo): the document ends, complete.
expect_run(0 "\"complete\":true,\"finished\":true" generate ${json} --corpus ${EXAMPLES}/../bench/docs/json
           --seed 4 --max-tokens 2000 --json)
expect_run(3 "cannot read documents '${WORK}/no-such-corpus'" generate ${json} --corpus ${WORK}/no-such-corpus)
expect_run(64 "--show: '-1' is not a whole number" mask ${json} --prefix 1 --show -1)

# Control bytes of a grammar are escaped in diagnostics (no terminal escape
# sequences), with the caret under the right character.
string(ASCII 27 esc)
file(WRITE ${WORK}/esc.cgram "start ::= '${esc}[2J' zz;\n")
expect_run_lacks(1 "start ::= '\\x1B[2J' zz;\n                    ^~" "${esc}" check ${WORK}/esc.cgram)

# File names are escaped too, in errors and in check's summary.
file(WRITE "${WORK}/name${esc}x.cgram" "start ::= 'a';\n")
expect_run_lacks(0 "name\\x1Bx.cgram: ok" "${esc}" check "${WORK}/name${esc}x.cgram")
expect_run_lacks(1 "cannot read grammar '${WORK}/gone\\x1B.cgram'" "${esc}" check "${WORK}/gone${esc}.cgram")
expect_run_lacks(3 "cannot read documents '${WORK}/gone\\x1B'" "${esc}" bench ${json} --docs "${WORK}/gone${esc}")

# A prefix with a byte that is not UTF-8: mask and match agree on where the
# text leaves the language (the byte is never replaced or dropped).
expect_run(2 "rejected at byte 2" match ${json} "{\"${byte_ff}")
expect_run(2 "the prefix leaves the language" mask ${json} --prefix "{\"${byte_ff}")

# bench --docs: a missing path says why; an empty folder warns; a folder
# that cannot be listed (not as root) is an error, never an abort.
expect_run(3 "cannot read documents '${WORK}/nonexistent': No such file or directory" bench ${json} --docs
           ${WORK}/nonexistent)
file(REMOVE_RECURSE ${WORK}/empty_docs)
file(MAKE_DIRECTORY ${WORK}/empty_docs)
expect_run(0 "warning: the folder '${WORK}/empty_docs' holds no documents" bench ${json} --docs ${WORK}/empty_docs)
file(REMOVE_RECURSE ${WORK}/locked_docs)
file(MAKE_DIRECTORY ${WORK}/locked_docs)
file(WRITE ${WORK}/locked_docs/a.json "1")
file(CHMOD ${WORK}/locked_docs PERMISSIONS OWNER_WRITE)
execute_process(COMMAND ${CGRAM} bench ${json} --docs ${WORK}/locked_docs RESULT_VARIABLE code OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 60)
file(CHMOD ${WORK}/locked_docs PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
string(FIND "${err}" "cannot list the documents folder" refused)
if(NOT (code EQUAL 0 OR (code EQUAL 3 AND NOT refused EQUAL -1)))
  message(FATAL_ERROR "bench --docs on an unreadable folder: exit ${code}\n${out}\n${err}")
endif()

# match runs the matcher's engine, one byte a step: a large text is linear,
# and token rules keep their meaning without a vocabulary (any! spans any
# non-empty text, except! counts are not checked).
string(REPEAT "{\"key\": [1, 2.5, true, null, \"text\"]}, " 20000 items)
file(WRITE ${WORK}/large.json "[${items}{}]")
expect_run(0 "complete" match ${json} --file ${WORK}/large.json)
file(WRITE ${WORK}/any.cgram "start ::= '<' any! ;\n")
expect_run(0 "complete" match ${WORK}/any.cgram "<abc>")
expect_run(1 "prefix" match ${WORK}/any.cgram "<")
expect_run(2 "rejected at byte 0" match ${WORK}/any.cgram ">")
expect_run(2 "rejected at byte 2" match ${WORK}/any.cgram "<a${byte_ff}")
file(WRITE ${WORK}/except.cgram "start ::= except!('x', 1) 'x' ;\n")
expect_run(0 "complete" match ${WORK}/except.cgram "yyyx")
expect_run(2 "rejected at byte 2 (line 1, column 3)" match ${WORK}/except.cgram "yxy")

# A vocabulary with no end-of-sequence token: its warning is printed, and
# generation stops for the right reason (not "--max-tokens" after 2 tokens);
# mask says end of sequence is not allowed, though the text is complete.
file(WRITE ${WORK}/no_eos.json "[\"a\", \"b\", \"{\", \"}\"]")
file(WRITE ${WORK}/ab.cgram "start ::= 'a' 'b'? ;\n")
expect_run(0 "warning: ${WORK}/no_eos.json: the vocabulary has no end-of-sequence token" generate ${WORK}/ab.cgram
           --vocab ${WORK}/no_eos.json)
expect_run(0 "2 tokens, stopped: the grammar can end here but the vocabulary has no end-of-sequence token" generate
           ${WORK}/ab.cgram --vocab ${WORK}/no_eos.json)
expect_run(0 "\"complete\":true,\"finished\":false,\"stop\":\"complete_no_end_of_sequence_token\",\"text\":\"ab\""
           generate ${WORK}/ab.cgram --vocab ${WORK}/no_eos.json --json)
file(WRITE ${WORK}/a_id.txt "0\n")
expect_run(0 "\"allowed\":[1],\"can_end\":false,\"complete\":true" mask ${WORK}/ab.cgram --vocab ${WORK}/no_eos.json
           --tokens ${WORK}/a_id.txt --json)
file(WRITE ${WORK}/az.cgram "start ::= 'a' 'z' ;\n")
expect_run(1 "1 tokens, stopped: no token of the vocabulary can continue the text" generate ${WORK}/az.cgram
           --vocab ${WORK}/no_eos.json)
# A vocabulary that cannot spell the grammar: mask warns instead of giving a
# silent empty mask.
file(WRITE ${WORK}/z.cgram "start ::= 'z' ;\n")
expect_run(0 "warning: no token of the vocabulary can continue the text after 0 prefix tokens" mask
           ${WORK}/z.cgram --vocab ${WORK}/no_eos.json)
expect_run(0 "\"dead_end\":true" mask ${WORK}/z.cgram --vocab ${WORK}/no_eos.json --json)
file(WRITE ${WORK}/x.cgram "start ::= 'x' ;\n")
expect_run(0 "\"complete\":true,\"finished\":true,\"stop\":\"end_of_sequence\",\"text\":\"x\"" generate
           ${WORK}/x.cgram --json)

# A pathologically ambiguous grammar stops at match's work budget (amortised
# over the text, with 2,048 bytes' worth of slack): a clear error, exit 3, in
# about a second (the oracle took 59 s and 725 MB on these 3,000 bytes).
file(WRITE ${WORK}/ambiguous.cgram "start ::= s ;\ns ::= s s | 'a' | '' ;\n")
string(REPEAT "a" 3000 a3000)
file(WRITE ${WORK}/a3000.txt "${a3000}")
expect_run(3 "steps of work over this sequence" match ${WORK}/ambiguous.cgram --file ${WORK}/a3000.txt)
expect_run(0 "complete" match ${WORK}/ambiguous.cgram "aaaaaaaaaa" --max-work-per-byte 1000000)
expect_run(3 "(20480 + 10 per byte" match ${WORK}/ambiguous.cgram "${a3000}" --max-work-per-byte 10)
# An unambiguous repetition lowered to nested rules: ending reduces the whole
# stack at once, within the budget of the whole text (not of one byte).
file(WRITE ${WORK}/rep.cgram "start ::= 'a'{0,10000} ;\n")
string(REPEAT "a" 6000 a6000)
file(WRITE ${WORK}/a6000.txt "${a6000}")
expect_run(0 "complete" match ${WORK}/rep.cgram --file ${WORK}/a6000.txt)
expect_run(64 "--max-work-per-byte: 0 is out of range" match ${WORK}/ambiguous.cgram "a" --max-work-per-byte 0)

# GBNF in: by the .gbnf extension or --format gbnf; convert writes .cgram
# that means the same; errors at their GBNF position.
file(WRITE ${WORK}/g.gbnf "# digits, then a name\nroot ::= [0-9]+ \"-\" my-name\nmy-name ::= [a-z]{1,8}\n")
expect_run(0 "start rule 'root'" check ${WORK}/g.gbnf)
expect_run(0 "start rule 'my-name'" check ${WORK}/g.gbnf --start my-name)
expect_run(0 "complete" match ${WORK}/g.gbnf "42-abc")
expect_run(2 "rejected" match ${WORK}/g.gbnf "42_abc")
file(COPY_FILE ${WORK}/g.gbnf ${WORK}/g_gbnf.txt)
expect_run(0 "complete" match ${WORK}/g_gbnf.txt "7-z" --format gbnf)
expect_run(3 "" match ${WORK}/g_gbnf.txt "7-z" --format cgram)
expect_run(0 "tokens allowed" mask ${WORK}/g.gbnf --prefix "42-")
expect_run(0 "my_name ::= #'[a-z]'{1,8} ;" convert ${WORK}/g.gbnf)
expect_run(0 "" convert ${WORK}/g.gbnf -o ${WORK}/g_converted.cgram)
expect_run(0 "\"ok\": true" check ${WORK}/g_converted.cgram --json)
file(READ ${WORK}/g_converted.cgram converted)
string(FIND "${converted}" "(* digits, then a name *)" comment_at)
if(comment_at EQUAL -1)
  message(FATAL_ERROR "convert dropped the comment:\n${converted}")
endif()
expect_run(0 "complete" match ${WORK}/g_converted.cgram "42-abc")
expect_run(64 "convert reads GBNF (.gbnf), Lark (.lark) or a JSON Schema (.json)" convert ${json})
file(WRITE ${WORK}/bad.gbnf "root ::= \"a\" missing\n")
expect_run(1 "bad.gbnf:1:14: error: undefined rule 'missing'" check ${WORK}/bad.gbnf)
expect_run(1 "bad.gbnf:1:14: error: undefined rule 'missing'" convert ${WORK}/bad.gbnf)

# Lark in: by the .lark extension or --format lark; convert keeps comments;
# errors at their Lark position.
file(WRITE ${WORK}/g.lark "// ids\n%import common.INT\n%ignore \" \"\nstart: \"id=\" INT (\",\" \"id=\" INT)*  // a list\n")
expect_run(0 "complete" match ${WORK}/g.lark "id=1 , id=2")
expect_run(2 "rejected" match ${WORK}/g.lark " id=1")
file(COPY_FILE ${WORK}/g.lark ${WORK}/g_lark.txt)
expect_run(0 "complete" match ${WORK}/g_lark.txt "id=3" --format lark)
expect_run(0 "(* a list *)" convert ${WORK}/g.lark)
file(WRITE ${WORK}/bad.lark "start: \"a\" missing\n")
expect_run(1 "bad.lark:1:12: error: unknown name 'missing'" check ${WORK}/bad.lark)

# Tools in: `cgram tools` writes the reply grammar; --format tools reads the list.
file(WRITE ${WORK}/tools.json "[{\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}]\n")
expect_run(0 "text ::= except!('<tool_call>')" tools ${WORK}/tools.json)
expect_run(0 "text ::= except!('[TOOL_CALLS]')" tools ${WORK}/tools.json --format mistral)
expect_run(0 "complete" match ${WORK}/tools.json --format tools --tool-format llama3 "{\"name\": \"add\", \"parameters\": {\"a\": 1}}")
file(WRITE ${WORK}/tools2.json "[{\"name\": \"add\"}, {\"name\": \"add\"}]")
expect_run(1 "tool 1 is named 'add'" tools ${WORK}/tools2.json)

# JSON Schema in: `cgram schema` writes the grammar; every grammar command
# takes the schema itself (.json, or --format json-schema), with
# --whitespace and --strict; errors and warnings at their schema position.
file(WRITE ${WORK}/person.json "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"name\": {\"type\": \"string\", \"maxLength\": 8},\n    \"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 130}\n  },\n  \"required\": [\"name\"],\n  \"additionalProperties\": false\n}\n")
expect_run(0 "root ::= '{' '\"name\"' ':'" schema ${WORK}/person.json --whitespace compact)
expect_run(0 "" schema ${WORK}/person.json -o ${WORK}/person.cgram --whitespace pretty)
expect_run(0 "\"ok\": true" check ${WORK}/person.cgram --json)
expect_run(0 "complete" match ${WORK}/person.json "{\"name\": \"Ada\", \"age\": 36}")
expect_run(2 "rejected" match ${WORK}/person.json "{\"name\": \"Ada\", \"age\": 131}")
expect_run(2 "rejected" match ${WORK}/person.json "{\"name\": \"Ada\", \"age\": 36}" --whitespace compact)
expect_run(0 "complete" match ${WORK}/person.json "{\"name\":\"Ada\",\"age\":36}" --whitespace compact)
expect_run(0 "complete" match ${WORK}/person.cgram "{\n  \"name\": \"Ada\"\n}")
file(COPY_FILE ${WORK}/person.json ${WORK}/person_schema.txt)
expect_run(0 "complete" match ${WORK}/person_schema.txt "{\"name\":\"B\"}" --format json-schema)
expect_run(0 "tokens allowed" mask ${WORK}/person.json --prefix "{\"name\": \"Ada\", \"age\": 1")
expect_run(0 "" generate ${WORK}/person.json --whitespace compact --max-tokens 400)
file(WRITE ${WORK}/loose.json "{\n  \"type\": \"array\",\n  \"uniqueItems\": true\n}\n")
expect_run(0 "loose.json:3:18: warning: 'uniqueItems' is not supported and is ignored" check ${WORK}/loose.json)
expect_run(1 "loose.json:3:18: error: 'uniqueItems' is not supported and is ignored: the grammar accepts more than the schema (--strict)" check ${WORK}/loose.json --strict)
file(WRITE ${WORK}/broken.json "{\"type\": \"object\",, }")
expect_run(1 "broken.json:1:19: error: invalid JSON: unexpected" schema ${WORK}/broken.json)
expect_run(64 "--whitespace: tight not in" schema ${WORK}/person.json --whitespace tight)

# cgram gpu: without a driver, a clear reason and exit 3 (the CPU path is
# used); the kernels' PTX on any machine.
expect_run(3 "no GPU: cannot load the CUDA driver (/nonexistent/libcuda.so.1)" gpu --library /nonexistent/libcuda.so.1)
expect_run(3 "every command works without a GPU" gpu --library /nonexistent/libcuda.so.1)
expect_run(0 "" gpu --emit-ptx sm_80 -o ${WORK}/kernels.ptx)
file(READ ${WORK}/kernels.ptx ptx)
foreach(kernel cgram_apply_f32 cgram_apply_bf16 cgram_fill cgram_set_bits)
  string(FIND "${ptx}" ".entry ${kernel}(" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "cgram gpu --emit-ptx: no kernel ${kernel} in the PTX")
  endif()
endforeach()
expect_run(1 "'sm_1' is not a GPU architecture" gpu --emit-ptx sm_1)
# cgram bench --gpu: without a driver, exit 3 with the reason; the kernels'
# host build runs the whole device path and checks it against the CPU.
file(WRITE ${WORK}/gpu_doc.json "{\"a\": [1, 2, {\"b\": \"text\"}], \"c\": null}")
expect_run(3 "no GPU: cannot load the CUDA driver" bench ${json} --docs ${WORK}/gpu_doc.json --gpu --cuda-library /nonexistent/libcuda.so.1)
expect_run(0 "masks equal the CPU's: yes; masked logits equal the CPU's: yes" bench ${json} --docs ${WORK}/gpu_doc.json --gpu --gpu-host --rows 5 --runs 2 --logits-width 32100)
expect_run(64 "--logits-width 100 does not hold the vocabulary's 32064 ids" bench ${json} --docs ${WORK}/gpu_doc.json --gpu --gpu-host --logits-width 100)
expect_run(64 "cgram bench: --rows only goes with --gpu" bench ${json} --docs ${WORK}/gpu_doc.json --rows 3)
expect_run(64 "--gpu times one grammar over its documents, not --suite" bench --suite ${WORK} --gpu)
# bench --slowest N: the N longest mask steps, with their document, step and text.
expect_run(0 "the 2 slowest masks:" bench ${json} --docs ${WORK}/gpu_doc.json --slowest 2)
expect_run(0 "gpu_doc.json step " bench ${json} --docs ${WORK}/gpu_doc.json --slowest 2)
expect_run(0 "\"slowest\": [" bench ${json} --docs ${WORK}/gpu_doc.json --slowest 1 --json)
expect_run(64 "--slowest times one grammar over its documents, not --suite" bench --suite ${WORK} --slowest 3)
# --canonical: a token only where the tokenizer itself would write it there.
expect_run(0 "" generate ${json} --canonical --seed 3 --max-tokens 60)
expect_run(0 "tokens allowed" mask ${json} --canonical --prefix "{\"a\": ")

// JSON Schema in: the pieces of the translator (frontend/json_text.h,
// frontend/json_schema.h), each against an independent reference.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "compile.h"
#include "helpers.h"
#include "json_text.h"

using namespace cgram;
using namespace cgram::test;

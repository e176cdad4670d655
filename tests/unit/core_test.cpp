#include <doctest/doctest.h>

#include "core/memory_plan.h"
#include "core/graph.h"

TEST_SUITE("core") {
TEST_CASE("placeholder") { CHECK(tern::dtype_size(tern::DType::kFloat32) == 4); }
}

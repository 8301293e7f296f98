#pragma once
// REQUIRE that a status is ok, naming the status when it is not.

#include <backplane/core/error.hpp>

#include <catch2/catch.hpp>

namespace backplane::test {

inline void require_ok(const status& s) {
    INFO(s.describe());
    REQUIRE(s.ok());
}

} // namespace backplane::test

#pragma once
// An environment variable set for one scope, unset at its end.

#include <cstdlib>
#include <string>

namespace backplane::test {

struct scoped_env {
    std::string name;
    scoped_env(std::string n, const std::string& value) : name(std::move(n)) { ::setenv(name.c_str(), value.c_str(), 1); }
    ~scoped_env() { ::unsetenv(name.c_str()); }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;
};

} // namespace backplane::test

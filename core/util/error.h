#pragma once
// The one exception type of the core: bad input from a user or a file. Its message names the
// file, op or field at fault, so a front end can print it as one line and exit.
#include <stdexcept>
#include <string>

namespace tp {

class InputError : public std::runtime_error {
public:
    explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

} // namespace tp

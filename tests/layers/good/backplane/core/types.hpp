#pragma once
// A header with no include.
namespace backplane {}

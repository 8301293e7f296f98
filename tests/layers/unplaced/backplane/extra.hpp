#pragma once
// In no layer.
namespace backplane {}

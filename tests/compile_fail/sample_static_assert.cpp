// expect: backplane compile-fail plumbing works
//
// Proves the compile-fail machinery itself: this must fail to compile with the
// message above. It uses no library header on purpose.
template <class T>
inline constexpr bool false_v = false;

static_assert(false_v<int>, "backplane compile-fail plumbing works");

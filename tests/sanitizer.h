#pragma once
// Whether this test binary runs under AddressSanitizer (the asan preset). Debug code under ASan
// runs several times slower, so the exhaustive tests check fewer random cases there; the
// normal build runs them all.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// doctest_cstr.h - doctest, with C strings printed as text. doctest 2.4.9 prints a char pointer that is not a
// literal (ggml_type_name(t), ggml_op_name(op) in INFO, CAPTURE, MESSAGE) as its address, and its switch for text
// (DOCTEST_CONFIG_TREAT_CHAR_STAR_AS_STRING) does not compile in Debian's 2.4.9. Only the printing changes:
// comparisons of char pointers in CHECKs stay pointer comparisons. Every test includes this instead of doctest.h.
#pragma once
#include <doctest/doctest.h>

namespace doctest {
template <> struct StringMaker<const char *> {
    static String convert(const char * s) { return s ? String(s) : String("(null)"); }
};
template <> struct StringMaker<char *> {
    static String convert(const char * s) { return StringMaker<const char *>::convert(s); }
};
} // namespace doctest

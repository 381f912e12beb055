// Regexes of JSON numbers within bounds, exactly: integers between two
// decimal bounds (any size: digit strings, not machine integers), and decimal
// numbers (no exponent) between decimal bounds, each bound inclusive or
// exclusive. Built from digit-by-digit comparisons: "at least 117" is a longer
// number, or the same length and a larger digit at the first difference.
#pragma once

#include <optional>
#include <string>

#include "runtime/rank/structured/regex_expr.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

/// A decimal number as digit strings: -?int.frac (int without leading zeros, "0" for
/// zero; frac without trailing zeros).
struct Decimal {
  bool negative = false;
  std::string int_digits = "0";
  std::string frac_digits;

  /// Parses JSON number text (exponents expanded); nullopt when not a number or too long.
  static std::optional<Decimal> parse(std::string_view text);
  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
  bool is_integer() const { return frac_digits.empty(); }
  /// -1, 0, 1.
  int compare(const Decimal& o) const;
  std::string to_string() const;
  /// The least integer >= this, and the greatest <= this.
  Decimal ceil() const;
  Decimal floor() const;
  Decimal plus_one() const;
  Decimal minus_one() const;
  /// This value times 10^e.
  Decimal shifted(int e) const;
};

struct NumberBound {
  Decimal value;
  bool exclusive = false;
};

/// Integers in [lo, hi] (either may be absent: unbounded), as canonical JSON integers
/// (no leading zeros, no "-0"). nothing when the range is empty.
ExprId integer_range(ExprStore& s, const std::optional<Decimal>& lo, const std::optional<Decimal>& hi);

/// Decimal numbers (-?int(.frac)?, no exponent) between the bounds.
ExprId decimal_range(ExprStore& s, const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi);

/// JSON numbers between the bounds: decimal_range, and exponent forms (mantissa e exponent)
/// with exponents from -20 to 20 (any exponent when the only bound is 0), each mantissa
/// bounded so the value is in range. Every value in range has a form here (a plain one);
/// Python's json.dumps writes 1e-05 and 1e+16 style exponents, which are covered.
ExprId number_range(ExprStore& s, const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi);

}  // namespace troupe::structured

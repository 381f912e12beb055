#include "runtime/rank/structured/number_ranges.hpp"

#include <algorithm>
#include <cctype>

namespace troupe::structured {
namespace {

constexpr int kMaxExponent = 400;  // bounds past 1e400 are refused by the caller (doubles stop at 1.8e308)

// a + 1 and a - 1 on unsigned digit strings (a - 1 needs a > 0).
std::string add_one(std::string a) {
  for (size_t i = a.size(); i-- > 0;) {
    if (a[i] != '9') {
      ++a[i];
      return a;
    }
    a[i] = '0';
  }
  return "1" + a;
}

std::string sub_one(std::string a) {
  for (size_t i = a.size(); i-- > 0;) {
    if (a[i] != '0') {
      --a[i];
      break;
    }
    a[i] = '9';
  }
  size_t nz = a.find_first_not_of('0');
  return nz == std::string::npos ? "0" : a.substr(nz);
}

int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.int_digits.size() != b.int_digits.size()) return a.int_digits.size() < b.int_digits.size() ? -1 : 1;
  if (int c = a.int_digits.compare(b.int_digits); c != 0) return c < 0 ? -1 : 1;
  size_t n = std::max(a.frac_digits.size(), b.frac_digits.size());
  std::string fa = a.frac_digits + std::string(n - a.frac_digits.size(), '0');
  std::string fb = b.frac_digits + std::string(n - b.frac_digits.size(), '0');
  int c = fa.compare(fb);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

ExprId digit_range(ExprStore& s, char lo, char hi) {
  if (lo > hi) return ExprStore::kNothing;
  return s.bytes(ByteSet::range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
}

ExprId any_digits(ExprStore& s, uint32_t n) { return s.repeat(digit_range(s, '0', '9'), n, n); }

// Digit strings of |x| digits (leading zeros allowed) >= x, and <= x.
ExprId digits_at_least(ExprStore& s, std::string_view x) {
  if (x.empty()) return ExprStore::kEmpty;
  auto rest = static_cast<uint32_t>(x.size() - 1);
  return s.alt(s.concat(s.byte(static_cast<uint8_t>(x[0])), digits_at_least(s, x.substr(1))),
               s.concat(digit_range(s, static_cast<char>(x[0] + 1), '9'), any_digits(s, rest)));
}

ExprId digits_at_most(ExprStore& s, std::string_view x) {
  if (x.empty()) return ExprStore::kEmpty;
  auto rest = static_cast<uint32_t>(x.size() - 1);
  return s.alt(s.concat(s.byte(static_cast<uint8_t>(x[0])), digits_at_most(s, x.substr(1))),
               s.concat(digit_range(s, '0', static_cast<char>(x[0] - 1)), any_digits(s, rest)));
}

// Digit strings of the same length as x and y, between them (x <= y).
ExprId digits_between(ExprStore& s, std::string_view x, std::string_view y) {
  if (x.empty()) return ExprStore::kEmpty;
  if (x[0] == y[0]) return s.concat(s.byte(static_cast<uint8_t>(x[0])), digits_between(s, x.substr(1), y.substr(1)));
  auto rest = static_cast<uint32_t>(x.size() - 1);
  ExprId parts[3] = {
      s.concat(s.byte(static_cast<uint8_t>(x[0])), digits_at_least(s, x.substr(1))),
      s.concat(digit_range(s, static_cast<char>(x[0] + 1), static_cast<char>(y[0] - 1)), any_digits(s, rest)),
      s.concat(s.byte(static_cast<uint8_t>(y[0])), digits_at_most(s, y.substr(1)))};
  return s.alt(parts);
}

// Canonical non-negative integers in [a, b] (b absent: unbounded); a <= b.
ExprId natural_range(ExprStore& s, const std::string& a, const std::optional<std::string>& b) {
  const size_t la = a.size();
  if (b && b->size() == la) return digits_between(s, a, *b);
  std::vector<ExprId> alts{digits_between(s, a, std::string(la, '9'))};
  ExprId lead = digit_range(s, '1', '9');
  if (!b) {
    alts.push_back(s.concat(lead, s.repeat(digit_range(s, '0', '9'), static_cast<uint32_t>(la), ExprStore::kUnbounded)));
  } else {
    const size_t lb = b->size();
    if (lb > la + 1) {
      alts.push_back(s.concat(lead, s.repeat(digit_range(s, '0', '9'), static_cast<uint32_t>(la),
                                             static_cast<uint32_t>(lb - 2))));
    }
    std::string lowest(lb, '0');  // 10...0, the least number of b's length
    lowest[0] = '1';
    alts.push_back(digits_between(s, lowest, *b));
  }
  return s.alt(alts);
}

bool magnitude_less(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// Fraction digit strings d (possibly empty) with 0.d >= 0.f (> when strict); f has no
// trailing zeros.
ExprId fraction_at_least(ExprStore& s, std::string_view f, bool strict) {
  ExprId digit = digit_range(s, '0', '9');
  if (f.empty()) {
    if (!strict) return s.star(digit);
    ExprId parts[3] = {s.star(digit), digit_range(s, '1', '9'), s.star(digit)};
    return s.concat(parts);
  }
  return s.alt(s.concat(digit_range(s, static_cast<char>(f[0] + 1), '9'), s.star(digit)),
               s.concat(s.byte(static_cast<uint8_t>(f[0])), fraction_at_least(s, f.substr(1), strict)));
}

// 0.d <= 0.f (< when strict), d possibly empty.
ExprId fraction_at_most(ExprStore& s, std::string_view f, bool strict) {
  ExprId digit = digit_range(s, '0', '9');
  if (f.empty()) return strict ? ExprStore::kNothing : s.star(s.byte('0'));
  ExprId parts[3] = {ExprStore::kEmpty, s.concat(digit_range(s, '0', static_cast<char>(f[0] - 1)), s.star(digit)),
                     s.concat(s.byte(static_cast<uint8_t>(f[0])), fraction_at_most(s, f.substr(1), strict))};
  return s.alt(parts);
}

// ".digits" or nothing, where the digits are in `digits` (a language possibly with "").
ExprId fraction_part(ExprStore& s, ExprId digits) {
  ExprId nonempty = s.both(digits, s.plus(digit_range(s, '0', '9')));
  return s.alt(s.nullable(digits) ? ExprStore::kEmpty : ExprStore::kNothing, s.concat(s.byte('.'), nonempty));
}

ExprId any_fraction(ExprStore& s) { return s.optional(s.concat(s.byte('.'), s.plus(digit_range(s, '0', '9')))); }

// Magnitudes int(.frac)? >= b (> when strict), b >= 0.
ExprId magnitude_at_least(ExprStore& s, const Decimal& b, bool strict) {
  ExprId above = s.concat(natural_range(s, add_one(b.int_digits), std::nullopt), any_fraction(s));
  ExprId equal = s.concat(s.literal(b.int_digits), fraction_part(s, fraction_at_least(s, b.frac_digits, strict)));
  return s.alt(above, equal);
}

ExprId magnitude_at_most(ExprStore& s, const Decimal& b, bool strict) {
  ExprId below = b.int_digits == "0"
                     ? ExprStore::kNothing
                     : s.concat(natural_range(s, "0", sub_one(b.int_digits)), any_fraction(s));
  ExprId equal = s.concat(s.literal(b.int_digits), fraction_part(s, fraction_at_most(s, b.frac_digits, strict)));
  return s.alt(below, equal);
}

}  // namespace

std::optional<Decimal> Decimal::parse(std::string_view t) {
  size_t i = 0;
  Decimal d;
  if (i < t.size() && t[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;
  long point = -1;
  for (; i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.'); ++i) {
    if (t[i] == '.') {
      if (point >= 0) return std::nullopt;
      point = static_cast<long>(digits.size());
    } else {
      digits += t[i];
    }
  }
  if (digits.empty()) return std::nullopt;
  if (point < 0) point = static_cast<long>(digits.size());
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
    long e = 0;
    size_t start = i;
    for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i) {
      e = std::min<long>(e * 10 + (t[i] - '0'), 100000);
    }
    if (i == start || e > kMaxExponent) return std::nullopt;
    point += neg ? -e : e;
  }
  if (i != t.size()) return std::nullopt;
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<long>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  std::string ip = digits.substr(0, static_cast<size_t>(point));
  std::string fp = digits.substr(static_cast<size_t>(point));
  size_t nz = ip.find_first_not_of('0');
  d.int_digits = nz == std::string::npos ? "0" : ip.substr(nz);
  size_t last = fp.find_last_not_of('0');
  d.frac_digits = last == std::string::npos ? "" : fp.substr(0, last + 1);
  if (d.is_zero()) d.negative = false;
  return d;
}

int Decimal::compare(const Decimal& o) const {
  if (negative != o.negative) return negative ? -1 : 1;
  int m = compare_magnitude(*this, o);
  return negative ? -m : m;
}

std::string Decimal::to_string() const {
  return (negative ? "-" : "") + int_digits + (frac_digits.empty() ? "" : "." + frac_digits);
}

Decimal Decimal::floor() const {
  Decimal d = *this;
  if (is_integer()) return d;
  d.frac_digits.clear();
  if (negative) d.int_digits = add_one(d.int_digits);
  return d;
}

Decimal Decimal::ceil() const {
  Decimal d = *this;
  if (is_integer()) return d;
  d.frac_digits.clear();
  if (!negative) d.int_digits = add_one(d.int_digits);
  if (d.int_digits == "0") d.negative = false;
  return d;
}

Decimal Decimal::plus_one() const {
  Decimal d = floor();
  if (!d.negative) {
    d.int_digits = add_one(d.int_digits);
  } else {
    d.int_digits = sub_one(d.int_digits);
    if (d.int_digits == "0") d.negative = false;
  }
  return d;
}

Decimal Decimal::minus_one() const {
  Decimal d = ceil();
  if (d.negative) {
    d.int_digits = add_one(d.int_digits);
  } else if (d.int_digits == "0") {
    d.negative = true;
    d.int_digits = "1";
  } else {
    d.int_digits = sub_one(d.int_digits);
  }
  return d;
}

Decimal Decimal::shifted(int e) const {
  if (is_zero() || e == 0) return *this;
  std::string digits = int_digits + frac_digits;
  long point = static_cast<long>(int_digits.size()) + e;
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<long>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  Decimal d;
  d.negative = negative;
  std::string ip = digits.substr(0, static_cast<size_t>(point));
  std::string fp = digits.substr(static_cast<size_t>(point));
  size_t nz = ip.find_first_not_of('0');
  d.int_digits = nz == std::string::npos ? "0" : ip.substr(nz);
  size_t last = fp.find_last_not_of('0');
  d.frac_digits = last == std::string::npos ? "" : fp.substr(0, last + 1);
  return d;
}

ExprId integer_range(ExprStore& s, const std::optional<Decimal>& lo, const std::optional<Decimal>& hi) {
  if (lo && hi && lo->compare(*hi) > 0) return ExprStore::kNothing;
  std::vector<ExprId> alts;
  // Non-negative values: [max(lo, 0), hi].
  if (!hi || !hi->negative) {
    std::string a = lo && !lo->negative ? lo->int_digits : "0";
    std::optional<std::string> b;
    if (hi) b = hi->int_digits;
    if (!b || !magnitude_less(*b, a)) alts.push_back(natural_range(s, a, b));
  }
  // Negative values [lo, min(hi, -1)]: "-" and magnitudes [max(1, -hi), -lo].
  if (!lo || lo->negative) {
    std::string a = hi && hi->negative ? hi->int_digits : "1";
    std::optional<std::string> b;
    if (lo) b = lo->int_digits;
    if (!b || !magnitude_less(*b, a)) alts.push_back(s.concat(s.byte('-'), natural_range(s, a, b)));
  }
  return s.alt(alts);
}

ExprId decimal_range(ExprStore& s, const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi) {
  if (lo && hi) {
    int c = lo->value.compare(hi->value);
    if (c > 0 || (c == 0 && (lo->exclusive || hi->exclusive))) return ExprStore::kNothing;
  }
  const Decimal zero;
  std::vector<ExprId> alts;
  // x >= 0: magnitudes from max(lo, 0) to hi.
  bool hi_allows_nonneg = !hi || !hi->value.negative;
  if (hi_allows_nonneg && !(hi && hi->value.is_zero() && hi->exclusive)) {
    ExprId above = lo && !lo->value.negative ? magnitude_at_least(s, lo->value, lo->exclusive)
                                             : magnitude_at_least(s, zero, false);
    ExprId below = hi ? magnitude_at_most(s, hi->value, hi->exclusive) : above;
    alts.push_back(s.both(above, below));
  }
  // x <= 0, written "-m": m <= -lo and m >= -hi (or >= 0).
  bool lo_allows_nonpos = !lo || lo->value.negative || (lo->value.is_zero() && !lo->exclusive);
  if (lo_allows_nonpos) {
    Decimal lo_mag = lo ? lo->value : zero;
    lo_mag.negative = false;
    ExprId at_most = lo ? magnitude_at_most(s, lo_mag, lo->exclusive) : magnitude_at_least(s, zero, false);
    ExprId at_least = magnitude_at_least(s, zero, false);
    if (hi && hi->value.negative) {
      Decimal hi_mag = hi->value;
      hi_mag.negative = false;
      at_least = magnitude_at_least(s, hi_mag, hi->exclusive);
    } else if (hi && hi->value.is_zero() && hi->exclusive) {
      at_least = magnitude_at_least(s, zero, true);
    }
    alts.push_back(s.concat(s.byte('-'), s.both(at_most, at_least)));
  }
  return s.alt(alts);
}

}  // namespace troupe::structured

namespace troupe::structured {

ExprId number_range(ExprStore& s, const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi) {
  ExprId digit = s.bytes(ByteSet::range('0', '9'));
  ByteSet e_set;
  e_set.add('e');
  e_set.add('E');
  ExprId e = s.bytes(e_set);
  std::vector<ExprId> alts{decimal_range(s, lo, hi)};
  // A single bound at 0: the mantissa's sign decides, whatever the exponent.
  const bool only_zero_lower = lo && lo->value.is_zero() && !hi;
  const bool only_zero_upper = hi && hi->value.is_zero() && !lo;
  if (only_zero_lower || only_zero_upper) {
    ByteSet sign;
    sign.add('+');
    sign.add('-');
    ExprId exponent = s.concat(std::vector<ExprId>{e, s.optional(s.bytes(sign)), s.plus(digit)});
    const NumberBound& b = only_zero_lower ? *lo : *hi;
    ExprId mantissa = only_zero_lower ? decimal_range(s, b, std::nullopt) : decimal_range(s, std::nullopt, b);
    alts.push_back(s.concat(mantissa, exponent));
    return s.alt(alts);
  }
  for (int x = -20; x <= 20; ++x) {
    // value = m * 10^x in [lo, hi]  <=>  m in [lo * 10^-x, hi * 10^-x]
    std::optional<NumberBound> mlo = lo, mhi = hi;
    if (mlo) mlo->value = mlo->value.shifted(-x);
    if (mhi) mhi->value = mhi->value.shifted(-x);
    std::string text = std::to_string(x < 0 ? -x : x);
    ExprId exponent = s.concat(std::vector<ExprId>{
        e, x < 0 ? s.byte('-') : s.optional(s.byte('+')), s.star(s.byte('0')), s.literal(text)});
    if (x == 0) exponent = s.concat(std::vector<ExprId>{e, s.optional(s.alt(s.byte('+'), s.byte('-'))), s.plus(s.byte('0'))});
    alts.push_back(s.concat(decimal_range(s, mlo, mhi), exponent));
  }
  return s.alt(alts);
}

}  // namespace troupe::structured

// The values a Jinja template computes with, with Python's semantics as jinja2
// has them: None, booleans, ints, floats, strings, lists, dicts (insertion
// ordered), callables, namespaces and jinja2's default Undefined (prints empty,
// falsy, iterates as empty; any other use is an error).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::jinja {

/// A render or compile error inside the engine; Template turns it into a Status.
/// It never leaves the module.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

class Value;
using ValueList = std::vector<Value>;

/// A Python dict: keys in insertion order (templates print and tojson them in that order).
struct ValueDict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);
};

/// Call arguments: positional then keyword, in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

struct Undefined {
  std::string hint;  // the error its use raises: "'foo' is undefined", "'dict object' has no attribute 'x'"
};
struct None {};

class Value {
 public:
  using List = std::shared_ptr<const ValueList>;
  using Dict = std::shared_ptr<const ValueDict>;
  using Namespace = std::shared_ptr<ValueDict>;  // jinja2's namespace(): the one mutable object
  using Function = std::shared_ptr<const Callable>;

  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}                             // NOLINT
  Value(Undefined u) : v_(std::move(u)) {}                // NOLINT
  Value(bool b) : v_(b) {}                                // NOLINT
  Value(int64_t i) : v_(i) {}                             // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}           // NOLINT
  Value(double d) : v_(d) {}                              // NOLINT
  Value(std::string s) : v_(std::move(s)) {}              // NOLINT
  Value(const char* s) : v_(std::string(s)) {}            // NOLINT
  Value(ValueList l) : v_(std::make_shared<const ValueList>(std::move(l))) {}  // NOLINT
  /// A Python tuple: a list that prints as "(a, b)" (literals, items(), dictsort).
  static Value tuple(ValueList l) {
    Value v(std::move(l));
    v.seq_ = Seq::tuple;
    return v;
  }
  /// What jinja2's map/select/selectattr/unique/items filters return: a generator. It
  /// iterates (once in Python; any number of times here), but has no len(), no
  /// indexing and no JSON form, and is always true.
  /// markupsafe's Markup (the safe and escape filters): concatenating a plain string
  /// to it with + HTML-escapes that string, as jinja2 does even without autoescape.
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
  }
  static Value iterator(ValueList l) {
    Value v(std::move(l));
    v.seq_ = Seq::iterator;
    return v;
  }
  Value(ValueDict d) : v_(std::make_shared<const ValueDict>(std::move(d))) {}  // NOLINT
  Value(Namespace n) : v_(std::move(n)) {}                // NOLINT
  Value(Function f) : v_(std::move(f)) {}                 // NOLINT

  static Value function(std::string name, std::function<Value(CallArgs&)> fn);

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is an int
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<List>(v_); }
  bool is_tuple() const { return is_list() && seq_ == Seq::tuple; }
  bool is_markup() const { return is_string() && markup_; }
  bool is_iterator() const { return is_list() && seq_ == Seq::iterator; }
  bool is_dict() const { return std::holds_alternative<Dict>(v_); }
  bool is_namespace() const { return std::holds_alternative<Namespace>(v_); }
  bool is_callable() const { return std::holds_alternative<Function>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(v_); }
  double as_float() const { return is_float() ? std::get<double>(v_) : static_cast<double>(as_int()); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const ValueList& as_list() const { return *std::get<List>(v_); }
  const ValueDict& as_dict() const { return *std::get<Dict>(v_); }
  ValueDict& as_namespace() const { return *std::get<Namespace>(v_); }
  const Callable& as_callable() const { return *std::get<Function>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  /// Python's type name ("str", "dict", "NoneType", ...), for messages.
  std::string type_name() const;
  /// Python's bool(x).
  bool truthy() const;
  /// Python's str(x) (what {{ x }} prints).
  std::string str() const;
  /// Python's repr(x) (how a list or dict prints its items).
  std::string repr() const;
  /// Python's ==.
  bool equals(const Value& other) const;
  /// Python's <; an error for types Python cannot order.
  bool less(const Value& other) const;
  /// The items to iterate: a list's items, a dict's keys, a string's characters,
  /// nothing for Undefined; an error for the rest.
  ValueList iterate() const;
  /// len(); an error for types without one.
  int64_t length() const;

 private:
  std::variant<Undefined, None, bool, int64_t, double, std::string, List, Dict, Namespace, Function> v_;
  enum class Seq : uint8_t { list, tuple, iterator };
  Seq seq_ = Seq::list;
  bool markup_ = false;
};

/// Python's repr of a float (shortest round-trip digits, "1.0", "1e-05", "inf").
std::string float_repr(double d);
/// Python's repr of a string.
std::string string_repr(const std::string& s);

/// JSON (insertion order kept) to a value; null is None.
Value from_json(const nlohmann::ordered_json& j);
/// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys,
/// separators=...); with indent, items are on their own lines. Undefined and callables are errors.
std::string to_json(const Value& v, int indent, bool sort_keys, const std::string& item_sep,
                    const std::string& key_sep);

/// The number of UTF-8 code points (Python's len of a str).
int64_t utf8_length(const std::string& s);
/// Code points of a UTF-8 string, each as its bytes.
std::vector<std::string> utf8_chars(const std::string& s);

}  // namespace troupe::jinja

// Built-in filters, tests, methods (str/dict/list) and globals of the Jinja interpreter,
// matching jinja2 and transformers' chat-template environment.
#pragma once
#include <string>
#include <string_view>

#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_value.h"

namespace tessera::jinja {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

FilterFn find_filter(std::string_view name);  // nullptr if unknown
TestFn find_test(std::string_view name);      // nullptr if unknown

// obj.name as a bound method (str/dict/list methods); undefined if obj has no such method.
Value bound_method(const Value& obj, const std::string& name);

// range, dict, namespace, raise_exception, strftime_now, cycler, joiner.
void add_globals(Scope& scope);

// Argument access: positional index `pos` or keyword `name`; nullptr when absent.
const Value* arg(const CallArgs& a, size_t pos, const char* name);
int64_t int_arg(const CallArgs& a, size_t pos, const char* name, int64_t def);
bool bool_arg(const CallArgs& a, size_t pos, const char* name, bool def);
std::string str_arg(const CallArgs& a, size_t pos, const char* name, const std::string& def);

}  // namespace tessera::jinja

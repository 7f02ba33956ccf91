// Jinja filters (`x | trim`, `tools | tojson`, ...), following jinja2's filters.py; `tojson`
// is transformers' override (json.dumps with ensure_ascii=False, no HTML escaping).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/status.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_text.h"

namespace tessera::jinja {
namespace {

std::string s_of(const Value& v) { return to_str(v); }

// jinja2 make_attrgetter: "a.b.0" looked up part by part with getitem.
Value attr_path(Interpreter& in, const Value& item, const std::string& path) {
    Value cur = item;
    size_t pos = 0;
    while (true) {
        size_t dot = path.find('.', pos);
        std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
        bool num = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
        cur = in.getitem(cur, num ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
        if (dot == std::string::npos) return cur;
        pos = dot + 1;
    }
}

// Sort key: lowercased strings unless case_sensitive (jinja2 ignore_case).
Value sort_key(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value(text::lower(v.str()));
    return v;
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
    TS_CHECK(v.is_number(), "bad operand type for abs(): '{}'", type_name(v));
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    TS_CHECK(v.as_int() != INT64_MIN, "integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
}

// jinja2 do_attr: Python attributes only, never items (d|attr('k') is undefined for a dict key).
Value f_attr(Interpreter&, const Value& v, CallArgs& a) {
    std::string name = str_arg(a, 0, "name", "");
    if (v.is_undefined()) fail_undefined(v);
    if (v.is_namespace())
        if (const Value* x = v.dict().find(std::string_view(name))) return *x;
    return bound_method(v, name);
}

Value f_batch(Interpreter&, const Value& v, CallArgs& a) {
    int64_t n = int_arg(a, 0, "linecount", 1);
    TS_CHECK(n > 0, "batch size must be positive");
    const Value* fill = arg(a, 1, "fill_with");
    List out, cur;
    for (const Value& x : iterate(v)) {
        cur.push_back(x);
        if (static_cast<int64_t>(cur.size()) == n) {
            out.push_back(Value::list(std::move(cur)));
            cur.clear();
        }
    }
    if (!cur.empty()) {
        if (fill && !fill->is_none())
            while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
        out.push_back(Value::list(std::move(cur)));
    }
    return Value::list(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value(text::capitalize(s_of(v))); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value(text::lower(s_of(v))); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value(text::upper(s_of(v))); }

// jinja2 do_title: words start after runs of [-\s({[<]; first char upper, rest lower.
Value f_title(Interpreter&, const Value& v, CallArgs&) {
    std::u32string u = text::decode(s_of(v));
    bool start = true;
    for (char32_t& c : u) {
        bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || text::is_space(c);
        if (sep) {
            start = true;
            continue;
        }
        c = start ? text::to_upper(c) : text::to_lower(c);
        start = false;
    }
    return Value(text::encode(u));
}

Value f_center(Interpreter& in, const Value& v, CallArgs& a) {
    int64_t w = int_arg(a, 0, "width", 80);
    in.check_size(static_cast<size_t>(std::max<int64_t>(w, 0)));
    std::string s = s_of(v);
    int64_t len = static_cast<int64_t>(text::length(s));
    if (w <= len) return Value(s);
    // CPython's str.center: left = marg / 2 + (marg & width & 1).
    int64_t total = w - len;
    int64_t left = total / 2 + (total & w & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
}

Value f_length(Interpreter&, const Value& v, CallArgs&) {
    switch (v.kind()) {
        case Value::Kind::Undefined: return Value(int64_t{0});
        case Value::Kind::String: return Value(static_cast<int64_t>(text::length(v.str())));
        case Value::Kind::List:
        case Value::Kind::Tuple: return Value(static_cast<int64_t>(v.items().size()));
        case Value::Kind::Dict: return Value(static_cast<int64_t>(v.dict().size()));
        default: fail(ErrorKind::Invalid, "object of type '{}' has no len()", type_name(v));
    }
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
    const Value* d = arg(a, 0, "default_value");
    bool boolean = bool_arg(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value("");
    return v;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
    TS_CHECK(v.is_dict(), "dictsort: expected a dict, got {}", type_name(v));
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    std::string by = str_arg(a, 1, "by", "key");
    bool rev = bool_arg(a, 2, "reverse", false);
    TS_CHECK(by == "key" || by == "value", "You can only sort by either 'key' or 'value'");
    List items;
    for (const auto& [k, x] : v.dict().items()) items.push_back(Value::tuple({k, x}));
    size_t pos = by == "key" ? 0 : 1;
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        int c = compare(sort_key(x.items()[pos], cs), sort_key(y.items()[pos], cs));
        return rev ? c > 0 : c < 0;
    });
    return Value::list(std::move(items));
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out.push_back(c);
        }
    }
    return out;
}
Value f_escape(Interpreter&, const Value& v, CallArgs&) { return Value(html_escape(s_of(v))); }

Value f_first(Interpreter&, const Value& v, CallArgs&) {
    List items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs&) {
    List items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

bool parse_float(const std::string& raw, double& out) {
    std::string s = text::strip(raw, nullptr, true, true);
    std::string t;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '_' && i > 0 && i + 1 < s.size() && isdigit(static_cast<unsigned char>(s[i - 1])) &&
            isdigit(static_cast<unsigned char>(s[i + 1])))
            continue;
        t.push_back(s[i]);
    }
    if (t.empty()) return false;
    std::string low = text::lower(t);
    if (low == "nan" || low == "+nan" || low == "-nan") return out = NAN, true;
    if (low == "inf" || low == "+inf" || low == "infinity" || low == "+infinity") return out = INFINITY, true;
    if (low == "-inf" || low == "-infinity") return out = -INFINITY, true;
    if (low.find_first_not_of("0123456789.e+-") != std::string::npos) return false;
    char* end = nullptr;
    out = std::strtod(t.c_str(), &end);
    return end && *end == 0;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
    const Value* def = arg(a, 0, "default");
    if (v.is_number()) return Value(v.as_float());
    double d;
    if (v.is_string() && parse_float(v.str(), d)) return Value(d);
    return def ? *def : Value(0.0);
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
    const Value* def = arg(a, 0, "default");
    int64_t base = int_arg(a, 1, "base", 10);
    Value fallback = def ? *def : Value(int64_t{0});
    if (v.is_int() || v.is_bool()) return Value(v.as_int());
    if (v.is_float()) {
        double d = v.as_float();
        if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
        return Value(static_cast<int64_t>(d));
    }
    if (!v.is_string()) return fallback;
    std::string s = text::strip(v.str(), nullptr, true, true);
    std::string t;
    for (char c : s)
        if (c != '_') t.push_back(c);
    bool neg = !t.empty() && t[0] == '-';
    if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.erase(0, 1);
    int b = static_cast<int>(base);
    if (t.size() > 2 && t[0] == '0') {
        char x = static_cast<char>(t[1] | 32);
        int pb = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 0;
        if (pb && (b == pb || b == 0)) {
            t.erase(0, 2);
            b = pb;
        }
    }
    if (b == 0) b = 10;
    if (!t.empty() && b >= 2 && b <= 36) {
        char* end = nullptr;
        errno = 0;
        long long n = std::strtoll(t.c_str(), &end, b);
        if (end && *end == 0 && errno == 0 && t.find_first_of("+- ") == std::string::npos) return Value(static_cast<int64_t>(neg ? -n : n));
    }
    double d;
    if (parse_float(v.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<int64_t>(d));
    return fallback;
}

// groupby(attribute, default=None, case_sensitive=False): sorted (grouper, items) tuples. The
// grouper is the first item's real key; `.grouper` / `.list` attribute access is not supported.
Value f_groupby(Interpreter& in, const Value& v, CallArgs& a) {
    const Value* attr = arg(a, 0, "attribute");
    TS_CHECK(attr, "groupby requires an attribute");
    const Value* def = arg(a, 1, "default");
    bool cs = bool_arg(a, 2, "case_sensitive", false);
    List items = iterate(v);
    auto key_of = [&](const Value& x) {
        Value k = attr_path(in, x, to_str(*attr));
        return k.is_undefined() && def ? *def : k;
    };
    std::vector<Value> keys;
    for (const Value& x : items) keys.push_back(sort_key(key_of(x), cs));
    std::vector<size_t> idx(items.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return compare(keys[x], keys[y]) < 0; });
    List out, group;
    for (size_t j = 0; j < idx.size(); ++j) {
        group.push_back(items[idx[j]]);
        if (j + 1 == idx.size() || !equal(keys[idx[j]], keys[idx[j + 1]])) {
            Value grouper = key_of(group.front());
            out.push_back(Value::tuple({grouper, Value::list(std::move(group))}));
            group.clear();
        }
    }
    return Value::list(std::move(out));
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
    const Value* w = arg(a, 0, "width");
    std::string ind;
    if (w && w->is_string()) {
        ind = w->str();
    } else {
        const int64_t n = std::max<int64_t>(w ? w->as_int() : 4, 0);
        in.check_size(static_cast<size_t>(n));  // indent(10**12)
        ind.assign(static_cast<size_t>(n), ' ');
    }
    bool first = bool_arg(a, 1, "first", false), blank = bool_arg(a, 2, "blank", false);
    std::vector<std::string> lines = text::splitlines(s_of(v) + "\n", false);
    size_t bytes = 0;  // at most: every line and an indent before each (checked before it is built)
    for (const std::string& l : lines) bytes += l.size() + 1 + ind.size();
    in.check_size(bytes);
    std::string rv;
    if (blank) {
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i) rv.append("\n").append(ind);
            rv.append(lines[i]);
        }
    } else {
        rv = lines.empty() ? "" : lines[0];
        for (size_t i = 1; i < lines.size(); ++i) {
            rv.push_back('\n');
            if (!lines[i].empty()) rv.append(ind).append(lines[i]);
        }
    }
    if (first) rv = ind + rv;
    in.check_size(rv.size());
    return Value(rv);
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
    if (v.is_undefined()) return Value::list({});
    TS_CHECK(v.is_dict(), "can only get item pairs from a mapping, not {}", type_name(v));
    List out;
    for (const auto& [k, x] : v.dict().items()) out.push_back(Value::tuple({k, x}));
    return Value::list(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
    std::string sep = str_arg(a, 0, "d", "");
    const Value* attr = arg(a, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& x : iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += to_str(attr && !attr->is_none() ? attr_path(in, x, to_str(*attr)) : x);
        in.check_size(out.size());
    }
    return Value(out);
}

Value f_list(Interpreter&, const Value& v, CallArgs&) { return Value::list(iterate(v)); }

Value minmax(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    const Value* attr = arg(a, 1, "attribute");
    List items = iterate(v);
    if (items.empty()) return Value::undefined(want_max ? "No aggregated item, sequence was empty." : "No aggregated item, sequence was empty.");
    auto key = [&](const Value& x) { return sort_key(attr && !attr->is_none() ? attr_path(in, x, to_str(*attr)) : x, cs); };
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
        int c = compare(key(items[i]), key(items[best]));
        if (want_max ? c > 0 : c < 0) best = i;
    }
    return items[best];
}
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return minmax(in, v, a, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return minmax(in, v, a, false); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
    List out;
    if (const Value* attr = arg(a, SIZE_MAX, "attribute")) {
        const Value* def = arg(a, SIZE_MAX, "default");
        for (const Value& x : iterate(v)) {
            Value r = attr_path(in, x, to_str(*attr));
            out.push_back(r.is_undefined() && def ? *def : r);
        }
        return Value::list(std::move(out));
    }
    TS_CHECK(!a.args.empty(), "map requires a filter argument");
    std::string name = to_str(a.args[0]);
    CallArgs rest;
    rest.args.assign(a.args.begin() + 1, a.args.end());
    rest.kwargs = a.kwargs;
    for (const Value& x : iterate(v)) {
        CallArgs copy = rest;
        out.push_back(in.filter(name, x, copy));
    }
    return Value::list(std::move(out));
}

// select/reject/selectattr/rejectattr share jinja2's select_or_reject.
Value select_or_reject(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
    size_t off = 0;
    std::string attr;
    if (by_attr) {
        TS_CHECK(!a.args.empty(), "missing attribute argument");
        attr = to_str(a.args[0]);
        off = 1;
    }
    std::string test;
    CallArgs targs;
    if (a.args.size() > off) {
        test = to_str(a.args[off]);
        targs.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(off + 1), a.args.end());
        targs.kwargs = a.kwargs;
    }
    List out;
    for (const Value& x : iterate(v)) {
        Value item = by_attr ? attr_path(in, x, attr) : x;
        bool pass;
        if (test.empty()) {
            pass = truthy(item);
        } else {
            CallArgs copy = targs;
            pass = in.test(test, item, copy);
        }
        if (pass == keep) out.push_back(x);
    }
    return Value::list(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, false); }

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
    std::string s = s_of(v);
    std::string from = str_arg(a, 0, "old", ""), to = str_arg(a, 1, "new", "");
    Value r(text::replace(s, from, to, int_arg(a, 2, "count", -1)));
    in.check_size(r.str().size());
    return r;
}

Value f_reverse(Interpreter&, const Value& v, CallArgs&) {
    if (v.is_string()) return slice(v, Value::none(), Value::none(), Value(int64_t{-1}));
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
}

// Python round(x, n): correctly rounded, ties to even (glibc printf rounds the exact binary value).
double py_round(double x, int64_t n) {
    if (!std::isfinite(x)) return x;
    if (n >= 0) {
        if (n > 300) return x;
        char buf[400];
        std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(n), x);
        return std::strtod(buf, nullptr);
    }
    double p = std::pow(10.0, static_cast<double>(-n));
    return std::nearbyint(x / p) * p;
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
    int64_t prec = int_arg(a, 0, "precision", 0);
    std::string method = str_arg(a, 1, "method", "common");
    TS_CHECK(v.is_number(), "round: expected a number, got {}", type_name(v));
    if (method == "common") {
        if (!v.is_float()) return Value(v.as_int());
        return Value(py_round(v.as_float(), prec));
    }
    TS_CHECK(method == "ceil" || method == "floor", "method must be common, ceil or floor");
    double p = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_float() * p;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Value f_safe(Interpreter&, const Value& v, CallArgs&) { return v; }
Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value(to_str(v)); }
Value f_pprint(Interpreter&, const Value& v, CallArgs&) { return Value(repr(v)); }

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
    bool rev = bool_arg(a, 0, "reverse", false), cs = bool_arg(a, 1, "case_sensitive", false);
    const Value* attr = arg(a, 2, "attribute");
    List items = iterate(v);
    std::vector<Value> keys;
    for (const Value& x : items) keys.push_back(sort_key(attr && !attr->is_none() ? attr_path(in, x, to_str(*attr)) : x, cs));
    std::vector<size_t> idx(items.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) {
        int c = compare(keys[x], keys[y]);
        return rev ? c > 0 : c < 0;
    });
    List out;
    for (size_t i : idx) out.push_back(items[i]);
    return Value::list(std::move(out));
}

Value f_striptags(Interpreter&, const Value& v, CallArgs&) {
    std::string s = s_of(v), t;
    for (size_t i = 0; i < s.size();) {
        if (s.compare(i, 4, "<!--") == 0) {
            size_t e = s.find("-->", i + 4);
            if (e != std::string::npos) {
                i = e + 3;
                continue;
            }
        }
        if (s[i] == '<') {
            size_t e = s.find('>', i + 1);
            if (e != std::string::npos) {
                i = e + 1;
                continue;
            }
        }
        t.push_back(s[i++]);
    }
    static const std::pair<const char*, const char*> kEnt[] = {{"&amp;", "&"}, {"&lt;", "<"},  {"&gt;", ">"},
                                                               {"&quot;", "\""}, {"&#39;", "'"}, {"&#34;", "\""}};
    for (const auto& [e, r] : kEnt) t = text::replace(t, e, r, -1);
    std::string out;
    for (const auto& w : text::split(t, nullptr, -1)) out += (out.empty() ? "" : " ") + w;
    return Value(out);
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
    const Value* attr = arg(a, 0, "attribute");
    const Value* start = arg(a, 1, "start");
    Value total = start ? *start : Value(int64_t{0});
    for (const Value& x : iterate(v))
        total = binary_op("+", total, attr && !attr->is_none() ? attr_path(in, x, to_str(*attr)) : x, SIZE_MAX);
    return total;
}

// transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
    JsonDumpOptions o;
    o.ensure_ascii = bool_arg(a, 0, "ensure_ascii", false);
    if (const Value* ind = arg(a, 1, "indent"); ind && !ind->is_none()) {
        if (ind->is_string()) o.indent = ind->str();
        else {
            TS_CHECK(ind->is_int() || ind->is_bool(), "tojson: indent must be an int or a string");
            o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(ind->as_int(), 0, 4096)), ' ');
        }
    }
    if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
        TS_CHECK(sep->is_sequence() && sep->items().size() == 2 && sep->items()[0].is_string() && sep->items()[1].is_string(),
                 "tojson: separators must be a pair of strings");
        o.item_separator = sep->items()[0].str();
        o.key_separator = sep->items()[1].str();
    }
    o.sort_keys = bool_arg(a, 3, "sort_keys", false);
    return Value(to_json(v, o));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
    const Value* chars = arg(a, 0, "chars");
    std::string c = chars && !chars->is_none() ? to_str(*chars) : std::string();
    return Value(text::strip(s_of(v), chars && !chars->is_none() ? &c : nullptr, true, true));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& a) {
    std::string s = s_of(v);
    int64_t length = int_arg(a, 0, "length", 255);
    bool kill = bool_arg(a, 1, "killwords", false);
    std::string end = str_arg(a, 2, "end", "...");
    int64_t leeway = int_arg(a, 3, "leeway", 5);
    int64_t n = static_cast<int64_t>(text::length(s)), endn = static_cast<int64_t>(text::length(end));
    if (n <= length + leeway) return Value(s);
    std::string head = slice(Value(s), Value::none(), Value(length - endn), Value::none()).str();
    if (kill) return Value(head + end);
    size_t sp = head.rfind(' ');
    return Value((sp == std::string::npos ? head : head.substr(0, sp)) + end);
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    const Value* attr = arg(a, 1, "attribute");
    List seen, out;
    for (const Value& x : iterate(v)) {
        Value k = sort_key(attr && !attr->is_none() ? attr_path(in, x, to_str(*attr)) : x, cs);
        bool dup = false;
        for (const Value& s : seen) dup = dup || equal(s, k);
        if (dup) continue;
        seen.push_back(k);
        out.push_back(x);
    }
    return Value::list(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : text::decode(s_of(v))) {
        bool w = text::is_alpha(c) || text::is_digit(c) || c == '_' || (c >= 0x80 && !text::is_space(c) && text::is_printable(c));
        if (w && !in_word) ++n;
        in_word = w;
    }
    return Value(n);
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
    if (!a.kwargs.empty()) {
        Dict d;
        for (const auto& [k, x] : a.kwargs) d.set(Value(k), x);
        return binary_op("%", Value(s_of(v)), Value::dict(std::move(d)), SIZE_MAX);
    }
    Value r = binary_op("%", Value(s_of(v)), Value::tuple(a.args), SIZE_MAX);
    in.check_size(r.str().size());
    return r;
}

struct Entry {
    const char* name;
    FilterFn fn;
};
const Entry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},           {"batch", f_batch},
    {"capitalize", f_capitalize}, {"center", f_center},   {"count", f_length},
    {"d", f_default},         {"default", f_default},     {"dictsort", f_dictsort},
    {"e", f_escape},          {"escape", f_escape},       {"forceescape", f_escape},
    {"first", f_first},       {"float", f_float},         {"format", f_format},
    {"groupby", f_groupby},   {"indent", f_indent},     {"int", f_int},             {"items", f_items},
    {"join", f_join},         {"last", f_last},           {"length", f_length},
    {"list", f_list},         {"lower", f_lower},         {"map", f_map},
    {"max", f_max},           {"min", f_min},             {"pprint", f_pprint},
    {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse},   {"round", f_round},         {"safe", f_safe},
    {"select", f_select},     {"selectattr", f_selectattr}, {"sort", f_sort},
    {"string", f_string},     {"striptags", f_striptags}, {"sum", f_sum},
    {"title", f_title},       {"tojson", f_tojson},       {"trim", f_trim},
    {"truncate", f_truncate}, {"unique", f_unique},       {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
    for (const Entry& e : kFilters)
        if (name == e.name) return e.fn;
    return nullptr;
}

}  // namespace tessera::jinja

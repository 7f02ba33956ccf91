// The `tessera` CLI: one file per verb, each registering itself with TESSERA_VERB.
// Options are declared per verb, so an unknown or malformed option is a clear error.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::cli {

struct Option {
    std::string name;   // without the leading "--"
    bool takes_value;   // false: a flag
    std::string help;
};

// Parsed arguments of one verb: --name value, --name=value, --flag, and positionals.
class Args {
public:
    Args(const std::vector<std::string>& argv, const std::vector<Option>& spec);  // throws Error

    bool flag(const std::string& name) const { return values_.count(name) > 0; }
    bool has(const std::string& name) const { return values_.count(name) > 0; }
    std::string get(const std::string& name, const std::string& def = "") const;
    std::string require(const std::string& name) const;  // throws "missing --name"
    int64_t get_int(const std::string& name, int64_t def) const;
    double get_float(const std::string& name, double def) const;
    const std::vector<std::string>& positional() const { return positional_; }
    // --model PATH, or the first positional argument when allow_positional.
    std::string model_path(bool allow_positional) const;

private:
    std::map<std::string, std::string> values_;
    std::vector<std::string> positional_;
};

struct Verb {
    const char* name;
    const char* summary;
    std::vector<Option> options;
    int (*run)(const Args& args);
};

void register_verb(const Verb& v);
const std::vector<Verb>& verbs();

// Options every model-loading verb shares.
std::vector<Option> common_model_options();
// Applies --threads / --device / TESSERA_LOG style settings shared by verbs.
void apply_common_options(const Args& args);

// Parses "1,2,3" into ids; throws Error on a bad list.
std::vector<int32_t> parse_id_list(const std::string& s);

struct VerbRegistrar {
    explicit VerbRegistrar(const Verb& v) { register_verb(v); }
};

}  // namespace tessera::cli

#define TESSERA_VERB_CAT2(a, b) a##b
#define TESSERA_VERB_CAT(a, b) TESSERA_VERB_CAT2(a, b)
#define TESSERA_VERB(...) \
    static ::tessera::cli::VerbRegistrar TESSERA_VERB_CAT(tessera_verb_, __LINE__)(::tessera::cli::Verb{__VA_ARGS__})

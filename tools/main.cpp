// `tessera` entry point: dispatches to the verb named by argv[1]; errors become one line + exit 1.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"
#include "core/log.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace tessera::cli {

namespace {
std::vector<Verb>& verb_table() {
    static std::vector<Verb> v;
    return v;
}

void print_usage() {
    std::printf("tessera — LLM inference server and tools\n\nusage: tessera VERB [options]\n\nverbs:\n");
    for (const auto& v : verbs()) std::printf("  %-10s %s\n", v.name, v.summary);
    std::printf("\n`tessera VERB --help` lists a verb's options.\n");
}

void print_verb_help(const Verb& v) {
    std::printf("tessera %s — %s\n\noptions:\n", v.name, v.summary);
    for (const auto& o : v.options)
        std::printf("  --%-24s %s\n", (o.name + (o.takes_value ? " VALUE" : "")).c_str(), o.help.c_str());
}
}  // namespace

void register_verb(const Verb& v) { verb_table().push_back(v); }
const std::vector<Verb>& verbs() { return verb_table(); }

Args::Args(const std::vector<std::string>& argv, const std::vector<Option>& spec) {
    auto find = [&](const std::string& n) -> const Option* {
        for (const auto& o : spec)
            if (o.name == n) return &o;
        return nullptr;
    };
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
            std::string name = a.substr(2), value;
            const auto eq = name.find('=');
            bool inline_value = eq != std::string::npos;
            if (inline_value) {
                value = name.substr(eq + 1);
                name = name.substr(0, eq);
            }
            const Option* o = find(name);
            if (!o) fail(ErrorKind::Invalid, "unknown option --{} (see --help)", name);
            if (o->takes_value) {
                if (!inline_value) {
                    if (i + 1 >= argv.size()) fail(ErrorKind::Invalid, "option --{} needs a value", name);
                    value = argv[++i];
                }
            } else if (inline_value) {
                fail(ErrorKind::Invalid, "option --{} takes no value", name);
            }
            values_[name] = value;
        } else {
            positional_.push_back(a);
        }
    }
}

std::string Args::get(const std::string& name, const std::string& def) const {
    auto it = values_.find(name);
    return it == values_.end() ? def : it->second;
}

std::string Args::require(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) fail(ErrorKind::Invalid, "missing required option --{}", name);
    return it->second;
}

int64_t Args::get_int(const std::string& name, int64_t def) const {
    if (!has(name)) return def;
    const std::string v = get(name);
    try {
        size_t pos = 0;
        const long long r = std::stoll(v, &pos);
        if (pos != v.size()) throw std::invalid_argument(v);
        return r;
    } catch (const std::exception&) {
        fail(ErrorKind::Invalid, "option --{}: '{}' is not an integer", name, v);
    }
}

double Args::get_float(const std::string& name, double def) const {
    if (!has(name)) return def;
    const std::string v = get(name);
    try {
        size_t pos = 0;
        const double r = std::stod(v, &pos);
        if (pos != v.size()) throw std::invalid_argument(v);
        return r;
    } catch (const std::exception&) {
        fail(ErrorKind::Invalid, "option --{}: '{}' is not a number", name, v);
    }
}

std::string Args::model_path(bool allow_positional) const {
    if (has("model")) return get("model");
    if (allow_positional && !positional_.empty()) return positional_[0];
    fail(ErrorKind::Invalid, "no model given: pass --model PATH");
}

std::vector<Option> common_model_options() {
    return {
        {"model", true, "model: a Hugging Face checkpoint directory or a .gguf file"},
        {"device", true, "cpu | cuda | auto (default auto)"},
        {"threads", true, "CPU threads (default: every core)"},
        {"memlog", false, "print memory snapshots to stderr"},
        {"kernels", true, "CUDA kernels: fast (the kernel pack, default) | reference (the plain path; also TESSERA_KERNELS)"},
        {"no-cuda-graphs", false, "run decode steps op by op instead of replaying CUDA graphs (also TESSERA_CUDA_GRAPHS=0)"},
    };
}

void apply_common_options(const Args& args) {
    if (args.has("kernels")) setenv("TESSERA_KERNELS", args.get("kernels").c_str(), 1);
    if (args.has("no-cuda-graphs")) setenv("TESSERA_CUDA_GRAPHS", "0", 1);
    if (args.has("threads")) {
        const int64_t n = args.get_int("threads", 0);
        TS_CHECK(n >= 1 && n <= 1024, "--threads {} out of range [1, 1024]", n);
        ThreadPool::set_global_threads(int(n));
    }
}

std::vector<int32_t> parse_id_list(const std::string& s) {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i < s.size()) {
        size_t j = s.find_first_of(", ", i);
        if (j == std::string::npos) j = s.size();
        const std::string tok = s.substr(i, j - i);
        if (!tok.empty()) {
            char* end = nullptr;
            errno = 0;
            const long v = std::strtol(tok.c_str(), &end, 10);
            TS_CHECK(end && *end == '\0' && errno == 0 && v >= 0 && v <= INT32_MAX, "bad token id '{}' in list", tok);
            ids.push_back(int32_t(v));
        }
        i = j + 1;
    }
    return ids;
}

}  // namespace tessera::cli

int main(int argc, char** argv) {
    using namespace tessera::cli;
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
        print_usage();
        return argc < 2 ? 1 : 0;
    }
    const Verb* verb = nullptr;
    for (const auto& v : verbs())
        if (!std::strcmp(v.name, argv[1])) verb = &v;
    if (!verb) {
        std::fprintf(stderr, "tessera: unknown verb '%s' (try `tessera --help`)\n", argv[1]);
        return 1;
    }
    std::vector<std::string> rest(argv + 2, argv + argc);
    for (const auto& a : rest)
        if (a == "--help" || a == "-h") {
            print_verb_help(*verb);
            return 0;
        }
    try {
        Args args(rest, verb->options);
        apply_common_options(args);
        return verb->run(args);
    } catch (const tessera::Error& e) {
        std::fprintf(stderr, "tessera %s: error: %s\n", verb->name, e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tessera %s: error: %s\n", verb->name, e.what());
        return 1;
    }
}

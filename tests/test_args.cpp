// The `main` flag parser: llama.cpp's names and defaults, values, ranges, one-line errors naming the flag, the
// flags llama.cpp has and main does not, escape processing, --help.
#include "args.h"
#include "llm-impl.h" // llm_layer_split

#include "doctest_cstr.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <unistd.h>

static bool parse(std::vector<const char *> a, llm_cli_params & p, std::string & err) {
    a.insert(a.begin(), "main");
    return llm_cli_parse((int) a.size(), a.data(), p, &err);
}

// parse a command line that must be accepted
static llm_cli_params parse_ok(std::vector<const char *> a) {
    llm_cli_params p;
    std::string err;
    const bool ok = parse(a, p, err);
    CHECK_MESSAGE(ok, err);
    return p;
}

// parse a command line that must fail; returns the message
static std::string parse_err(std::vector<const char *> a) {
    llm_cli_params p;
    std::string err;
    CHECK_FALSE(parse(a, p, err));
    CHECK(err.find('\n') == std::string::npos);
    return err;
}

// a file with these bytes, removed when the test case ends
struct temp_file {
    std::string path;
    explicit temp_file(const std::string & text) {
        char name[] = "/tmp/test_args.XXXXXX";
        const int fd = mkstemp(name);
        REQUIRE(fd >= 0);
        close(fd);
        path = name;
        std::ofstream(path, std::ios::binary) << text;
    }
    ~temp_file() { std::remove(path.c_str()); }
};

TEST_CASE("llama.cpp-compatible flags parse") {
    llm_cli_params p;
    std::string err;
    REQUIRE(parse({"-m", "x.gguf", "-p", "hi", "-n", "12", "-c", "256", "-b", "32", "-t", "2", "-s", "7", "--temp",
                   "0", "--top-k", "5", "--top-p", "0.5", "--min-p", "0.1", "--repeat-penalty", "1.1",
                   "--repeat-last-n", "16", "-cnv", "-sys", "be nice", "--special", "--verbose-prompt", "-ngl", "99"},
                  p, err));
    CHECK(p.model == "x.gguf");
    CHECK(p.prompt == "hi");
    CHECK(p.n_predict == 12);
    CHECK(p.n_ctx == 256);
    CHECK(p.n_ctx_set);
    CHECK(p.n_batch == 32);
    CHECK(p.n_threads == 2);
    CHECK(p.sampling.seed == 7u);
    CHECK(p.sampling.temp == 0.0f);
    CHECK(p.sampling.top_k == 5);
    CHECK(p.sampling.top_p == doctest::Approx(0.5f));
    CHECK(p.sampling.min_p == doctest::Approx(0.1f));
    CHECK(p.sampling.repeat_penalty == doctest::Approx(1.1f));
    CHECK(p.sampling.repeat_last_n == 16);
    CHECK(p.conversation);
    CHECK(p.system_prompt == "be nice");
    CHECK(p.special);
    CHECK(p.verbose_prompt);
    CHECK(p.n_gpu_layers == 99);
}

TEST_CASE("long and short forms, and llama.cpp's underscores, name the same flag") {
    CHECK(parse_ok({"--predict", "3"}).n_predict == 3);
    CHECK(parse_ok({"--n-predict", "4"}).n_predict == 4);
    CHECK(parse_ok({"--n_predict", "5"}).n_predict == 5);
    CHECK(parse_ok({"--ctx-size", "64"}).n_ctx == 64);
    CHECK(parse_ok({"--batch-size", "8"}).n_batch == 8);
    CHECK(parse_ok({"--threads", "3"}).n_threads == 3);
    CHECK(parse_ok({"--gpu-layers", "7"}).n_gpu_layers == 7);
    CHECK(parse_ok({"--n_gpu_layers", "8"}).n_gpu_layers == 8);
    CHECK(parse_ok({"--model", "m.gguf"}).model == "m.gguf");
    CHECK(parse_ok({"--prompt", "x"}).prompt == "x");
    CHECK(parse_ok({"--seed", "9"}).sampling.seed == 9u);
    CHECK(parse_ok({"-s", "-1"}).sampling.seed == 0xFFFFFFFFu);
    CHECK(parse_ok({"--system-prompt", "s"}).system_prompt == "s");
    CHECK(parse_ok({"--system", "s"}).system_prompt == "s");
    CHECK(parse_ok({"-sp"}).special);
    CHECK(parse_ok({"--usage"}).show_help);
    CHECK(parse_ok({"-h"}).show_help);
    CHECK(parse_ok({"--keep", "-1"}).n_keep == -1);
}

TEST_CASE("defaults are llama.cpp's where the flags overlap") {
    const llm_cli_params p;
    CHECK(p.flash_attn == LLM_CLI_SWITCH_AUTO);
    CHECK(p.color == LLM_CLI_SWITCH_AUTO);
    CHECK(p.n_predict == -1);
    CHECK(p.n_batch == 512);
    CHECK(p.n_parallel == 1);
    CHECK(p.use_mmap == -1);  // the loader's default: read into memory where it fits
    CHECK(p.use_repack);
    CHECK_FALSE(p.use_mlock);
    CHECK(p.warmup);
    CHECK(p.escape);
    CHECK(p.display_prompt);
    CHECK_FALSE(p.interactive);
    CHECK_FALSE(p.conversation);  // unlike llama.cpp: no automatic chat mode from the model's template
    CHECK_FALSE(p.ignore_eos);
    CHECK_FALSE(p.context_shift);
    CHECK(p.reverse_prompts.empty());
}

TEST_CASE("-fa / --flash-attn: on|off|auto, and a bare -fa means on") {
    CHECK(parse_ok({"-fa"}).flash_attn == LLM_CLI_SWITCH_ON);
    const llm_cli_params p = parse_ok({"-fa", "-c", "64"});  // followed by another flag
    CHECK(p.flash_attn == LLM_CLI_SWITCH_ON);
    CHECK(p.n_ctx == 64);
    for (const char * v : {"on", "enabled", "true", "1"}) CHECK(parse_ok({"-fa", v}).flash_attn == LLM_CLI_SWITCH_ON);
    for (const char * v : {"off", "disabled", "false", "0"}) {
        CHECK(parse_ok({"--flash-attn", v}).flash_attn == LLM_CLI_SWITCH_OFF);
    }
    for (const char * v : {"auto", "-1"}) CHECK(parse_ok({"-fa", v}).flash_attn == LLM_CLI_SWITCH_AUTO);
    CHECK(parse_ok({"-fa", "off", "-fa", "auto"}).flash_attn == LLM_CLI_SWITCH_AUTO);
    CHECK(parse_ok({"--flash_attn", "off"}).flash_attn == LLM_CLI_SWITCH_OFF);
    CHECK(parse_err({"-fa", "maybe"}).find("unknown value 'maybe' for -fa (on, off, auto)") != std::string::npos);
    // a quantized V cache needs flash attention: fine with auto (main turns it on) and on, an error with off
    CHECK(parse_ok({"-ctv", "q8_0"}).cache_type_v == GGML_TYPE_Q8_0);
    CHECK(parse_ok({"-ctv", "q8_0", "-fa", "on"}).flash_attn == LLM_CLI_SWITCH_ON);
    CHECK(parse_err({"-ctv", "q8_0", "-fa", "off"}).find("a quantized V cache (-ctv q8_0) needs flash attention") !=
          std::string::npos);
}

TEST_CASE("-co / --color: on|off|auto, bare means on") {
    CHECK(parse_ok({"--color"}).color == LLM_CLI_SWITCH_ON);
    CHECK(parse_ok({"-co", "off"}).color == LLM_CLI_SWITCH_OFF);
    CHECK(parse_ok({"--color", "on"}).color == LLM_CLI_SWITCH_ON);
    CHECK(parse_ok({"-co", "auto"}).color == LLM_CLI_SWITCH_AUTO);
    CHECK(parse_ok({"--color", "-n", "3"}).n_predict == 3);
    CHECK(parse_err({"--color", "blue"}).find("unknown value 'blue' for --color") != std::string::npos);
}

TEST_CASE("two-way switches: the positive and the --no- form") {
    CHECK(parse_ok({"--no-mmap"}).use_mmap == 0);
    CHECK(parse_ok({"--no-mmap", "--mmap"}).use_mmap == 1);
    CHECK(parse_ok({"--mlock"}).use_mlock);
    CHECK_FALSE(parse_ok({"--no-repack"}).use_repack);
    CHECK_FALSE(parse_ok({"-nr"}).use_repack);  // llama.cpp's short form of --no-repack
    CHECK(parse_ok({"-nr", "--repack"}).use_repack);
    CHECK_FALSE(parse_ok({"--no-warmup"}).warmup);
    CHECK(parse_ok({"--no-warmup", "--warmup"}).warmup);
    CHECK(parse_ok({"--context-shift"}).context_shift);
    CHECK_FALSE(parse_ok({"--context-shift", "--no-context-shift"}).context_shift);
    CHECK_FALSE(parse_ok({"--no-display-prompt"}).display_prompt);
    CHECK(parse_ok({"--no-display-prompt", "--display-prompt"}).display_prompt);
    CHECK(parse_ok({"--jinja"}).jinja);
    CHECK_FALSE(parse_ok({"--jinja", "--no-jinja"}).jinja);
    CHECK_FALSE(parse_ok({"--no-escape"}).escape);
    CHECK(parse_ok({"--no-escape", "-e"}).escape);
    CHECK(parse_ok({"--no-escape", "--escape"}).escape);
    CHECK(parse_ok({"-v"}).verbose);
    CHECK(parse_ok({"--verbose"}).verbose);
    CHECK(parse_ok({"--log-verbose"}).verbose);
    CHECK(parse_ok({"--log-disable"}).log_disable);
    CHECK(parse_ok({"--ignore-eos"}).ignore_eos);
    CHECK(parse_ok({"--verbose-prompt"}).verbose_prompt);
}

TEST_CASE("interactive mode: -i, -if, -mli, -r (repeatable), --in-prefix, --in-suffix, --in-prefix-bos") {
    CHECK(parse_ok({"-i"}).interactive);
    CHECK(parse_ok({"--interactive"}).interactive);
    const llm_cli_params f = parse_ok({"--interactive-first"});
    CHECK(f.interactive_first);
    CHECK(f.interactive);  // -if implies -i
    CHECK(parse_ok({"-if"}).interactive);
    CHECK(parse_ok({"-mli"}).multiline_input);
    CHECK(parse_ok({"--multiline-input"}).multiline_input);
    const llm_cli_params p = parse_ok({"-r", "User:", "--reverse-prompt", "###", "--in-prefix", " ", "--in-suffix",
                                       "Bob:", "--in-prefix-bos"});
    REQUIRE(p.reverse_prompts.size() == 2);
    CHECK(p.reverse_prompts[0] == "User:");
    CHECK(p.reverse_prompts[1] == "###");
    CHECK(p.input_prefix == " ");
    CHECK(p.input_suffix == "Bob:");
    CHECK(p.input_prefix_bos);
    CHECK(parse_err({"-r", ""}).find("empty reverse prompt for -r") != std::string::npos);
    CHECK(parse_err({"-r"}).find("missing value for -r") != std::string::npos);
}

TEST_CASE("conversation: -cnv / -no-cnv, -st implies -cnv unless -no-cnv") {
    CHECK(parse_ok({"--conversation"}).conversation);
    CHECK_FALSE(parse_ok({"-cnv", "-no-cnv"}).conversation);
    CHECK_FALSE(parse_ok({"-cnv", "--no-conversation"}).conversation);
    const llm_cli_params st = parse_ok({"-st"});
    CHECK(st.single_turn);
    CHECK(st.conversation);
    CHECK(parse_ok({"--single-turn", "-cnv"}).conversation);
    CHECK_FALSE(parse_ok({"-no-cnv", "-st"}).conversation);
}

TEST_CASE("stored for later use: chat template file, --jinja, grammars, JSON schemas, -np, -mg") {
    temp_file tmpl("{{ messages }}\n");
    temp_file gbnf("root ::= \"yes\" | \"no\"\n");
    temp_file schema("{\"type\": \"object\"}");
    const llm_cli_params p =
        parse_ok({"--chat-template-file", tmpl.path.c_str(), "--jinja", "--grammar-file", gbnf.path.c_str(),
                  "--json-schema-file", schema.path.c_str(), "-np", "4", "-mg", "1", "--chat-template", "llama3"});
    CHECK(p.chat_template_file == tmpl.path);
    CHECK(p.chat_template_source == "{{ messages }}\n");
    CHECK(p.jinja);
    CHECK(p.grammar_file == gbnf.path);
    CHECK(p.grammar == "root ::= \"yes\" | \"no\"\n");
    CHECK(p.json_schema_file == schema.path);
    CHECK(p.json_schema == "{\"type\": \"object\"}");
    CHECK(p.n_parallel == 4);
    CHECK(p.main_gpu == 1);
    CHECK(p.chat_template == "llama3");
    CHECK(parse_ok({"--grammar", "root ::= [a-z]+"}).grammar == "root ::= [a-z]+");
    CHECK(parse_ok({"-j", "{}"}).json_schema == "{}");
    CHECK(parse_ok({"--json-schema", "{\"a\":1}"}).json_schema == "{\"a\":1}");
    CHECK(parse_ok({"-jf", schema.path.c_str()}).json_schema_file == schema.path);
    CHECK(parse_ok({"--parallel", "2"}).n_parallel == 2);
    CHECK(parse_ok({"--main-gpu", "0"}).main_gpu == 0);
    CHECK(parse_err({"--grammar-file", "/nonexistent/g.gbnf"}).find("cannot read grammar file") != std::string::npos);
    CHECK(parse_err({"-jf", "/nonexistent/s.json"}).find("cannot read JSON schema file") != std::string::npos);
    CHECK(parse_err({"--chat-template-file", "/nonexistent/t.jinja"}).find("cannot read chat template file") !=
          std::string::npos);
    CHECK(parse_err({"-np", "0"}).find("out of range") != std::string::npos);
}

TEST_CASE("prompt files: -f drops one trailing newline (as llama.cpp), -bf keeps every byte, -sysf") {
    temp_file f("Once upon a time\n\n");
    const llm_cli_params a = parse_ok({"-f", f.path.c_str()});
    CHECK(a.prompt == "Once upon a time\n");
    CHECK(a.prompt_file == f.path);
    CHECK(parse_ok({"--binary-file", f.path.c_str()}).prompt == "Once upon a time\n\n");
    temp_file s("Be brief.\n");
    CHECK(parse_ok({"-sysf", s.path.c_str()}).system_prompt == "Be brief.");
    CHECK(parse_ok({"--system-prompt-file", s.path.c_str()}).system_prompt == "Be brief.");
}

TEST_CASE("escapes: processed in -p, --in-prefix, --in-suffix and -r unless --no-escape") {
    const llm_cli_params p = parse_ok({"-p", "a\\nb\\tc", "--in-prefix", "\\n> ", "--in-suffix", "\\x41:", "-r",
                                       "\\nUser:", "-sys", "x\\ny"});
    CHECK(p.prompt == "a\nb\tc");
    CHECK(p.input_prefix == "\n> ");
    CHECK(p.input_suffix == "A:");
    CHECK(p.reverse_prompts[0] == "\nUser:");
    CHECK(p.system_prompt == "x\\ny");  // not the system prompt (as llama.cpp)
    // --no-escape anywhere on the line keeps the text as typed
    const llm_cli_params q = parse_ok({"-p", "a\\nb", "--no-escape", "-r", "\\n"});
    CHECK(q.prompt == "a\\nb");
    CHECK(q.reverse_prompts[0] == "\\n");
    temp_file f("one\\ntwo\n");  // a prompt file too, as llama.cpp does
    CHECK(parse_ok({"-f", f.path.c_str()}).prompt == "one\ntwo");
}

TEST_CASE("llm_process_escapes: llama.cpp's set; anything else is left as written") {
    CHECK(llm_process_escapes("\\n\\r\\t\\'\\\"\\\\") == "\n\r\t'\"\\");
    CHECK(llm_process_escapes("\\x41\\x7a\\x0A") == "Az\n");
    CHECK(llm_process_escapes("\\x4") == "\\x4");    // one hex digit: kept
    CHECK(llm_process_escapes("\\xZZ") == "\\xZZ");  // not hex: kept
    CHECK(llm_process_escapes("\\a\\q") == "\\a\\q");
    CHECK(llm_process_escapes("end\\") == "end\\");  // a lone trailing backslash stays
    CHECK(llm_process_escapes("\\\\n") == "\\n");    // an escaped backslash, then a plain n
    CHECK(llm_process_escapes("") == "");
    CHECK(llm_process_escapes("h\xC3\xA9") == "h\xC3\xA9");
}

TEST_CASE("llama.cpp flags main does not implement say so; unknown ones stay unknown") {
    for (const char * f : {"--lora", "--lora-scaled", "--control-vector", "-md", "--model-draft", "--draft-max",
                           "--draft", "--mmproj", "--image", "--rpc", "-dev", "--device",
                           "--numa", "--override-kv", "--yarn-orig-ctx", "--yarn-ext-factor", "--rope-scaling",
                           "--rope-freq-base", "--embedding", "--reranking", "--pooling", "-dt", "--defrag-thold",
                           "--cache-reuse", "--spec-replace", "-lcs", "--lookup-cache-dynamic", "-hf", "--hf-repo",
                           "-mu", "--model-url", "-ub", "-tb", "--mirostat", "--logit-bias", "-nkvo", "--version",
                           "--log-file", "--samplers", "--port"}) {
        CHECK(llm_cli_is_unsupported(f));
        CHECK_MESSAGE(parse_err({f, "x"}) == std::string("not supported: ") + f, f);
    }
    CHECK(parse_err({"--lora_scaled", "a", "1"}) == "not supported: --lora-scaled");  // normalised first
    CHECK(parse_err({"--foo"}) == "unknown argument: --foo");
    CHECK(parse_err({"-x"}) == "unknown argument: -x");
    CHECK_FALSE(llm_cli_is_unsupported("--foo"));
    // nothing main implements is in the table: every form --help lists
    const std::string u = llm_cli_usage("main");
    size_t n_forms = 0;
    for (size_t at = 0; (at = u.find("\n  -", at)) != std::string::npos; ++at) {
        std::string forms = u.substr(at + 3, u.find('\n', at + 1) - at - 3);
        forms = forms.substr(0, forms.find("  "));  // the help text starts after two spaces
        size_t from = 0;
        while (from < forms.size()) {
            size_t to = forms.find(", ", from);
            if (to == std::string::npos) to = forms.size();
            const std::string form = forms.substr(from, to - from);
            const std::string flag = form.substr(0, form.find(' '));  // without its value
            CHECK_MESSAGE(!llm_cli_is_unsupported(flag), flag);
            llm_cli_params p;
            std::string err;
            CHECK_MESSAGE(!(parse({flag.c_str()}, p, err) == false && err.rfind("unknown", 0) == 0), flag);
            ++n_forms;
            from = to + 2;
        }
    }
    CHECK(n_forms > 90);
    for (const char * f : {"-fa", "--flash-attn", "--no-mmap", "--mmap", "--mlock", "-i", "-if", "-r", "--in-prefix",
                           "--in-suffix", "--in-prefix-bos", "--ignore-eos", "-cnv", "-no-cnv", "-st", "--no-warmup",
                           "--log-disable", "--chat-template-file", "--jinja", "--grammar", "--grammar-file", "-j",
                           "-jf", "-sp", "--no-display-prompt", "-co", "--color", "-np", "--no-escape", "-e", "-v",
                           "-mg", "-sysf", "-bf", "-mli", "-ctk", "-ctv", "-ngl", "--keep", "--context-shift", "-nr",
                           "--no-repack", "--repack", "-sm", "--split-mode", "-ts", "--tensor-split"}) {
        CHECK_MESSAGE(!llm_cli_is_unsupported(f), f);
    }
}

TEST_CASE("bad flag values give an error naming the flag") {
    struct bad { std::vector<const char *> argv; const char * expect; };
    const bad cases[] = {
        {{"-n"}, "missing value for -n"},
        {{"-c", "abc"}, "invalid integer 'abc' for -c"},
        {{"-t", "0"}, "out of range"},
        {{"--temp", "-1"}, "out of range"},
        {{"--top-p", "1.5"}, "out of range"},
        {{"--temp", "nan"}, "invalid number"},
        {{"-b", "99999999999999999999"}, "invalid integer"},
        {{"--bogus"}, "unknown argument: --bogus"},
        {{"--cache-type", "q4"}, "unknown cache type"},
        {{"-ctk", "q5_1"}, "unknown cache type 'q5_1' for -ctk (f32, f16, q8_0, q4_0)"},
        {{"-fa", "off", "-ctv", "q8_0"}, "a quantized V cache (-ctv q8_0) needs flash attention"},
        {{"--chat-template", "chatml"}, "unknown chat template"},
        {{"-f", "/nonexistent/prompt.txt"}, "cannot read prompt file"},
        {{"-s", "x"}, "invalid seed"},
        {{"--repeat-penalty", "0"}, "must be > 0"},
        {{"-mg", "-1"}, "out of range"},
        {{"-sm", "rows"}, "unknown split mode 'rows' for -sm (none, layer, row)"},
        {{"-ts", "1,-1"}, "bad value '1,-1' for -ts"},
        {{"--tensor-split", "3,,1"}, "bad value '3,,1' for --tensor-split"},
        {{"--in-prefix"}, "missing value for --in-prefix"},
        {{"--x\ny"}, "unknown argument: --x\\x0ay"},
    };
    for (const auto & c : cases) {
        const std::string err = parse_err(c.argv);
        CHECK_MESSAGE(err.find(c.expect) != std::string::npos, err);
    }
}

TEST_CASE("several GPUs: -sm none|layer|row (any case), -ts with commas or slashes, layer by default") {
    llm_cli_params p;
    std::string err;
    CHECK(p.split_mode == LLM_SPLIT_LAYER);
    CHECK(p.tensor_split.empty());
    REQUIRE(parse({"-sm", "None", "-ts", "3,1"}, p, err));
    CHECK(p.split_mode == LLM_SPLIT_NONE);
    CHECK(p.tensor_split == std::vector<float>{3, 1});
    REQUIRE(parse({"--split-mode", "row", "--tensor-split", "0.5/0/1.5"}, p, err));
    CHECK(p.split_mode == LLM_SPLIT_ROW); // parsed; the model load says it is not supported yet
    CHECK(p.tensor_split == std::vector<float>{0.5f, 0, 1.5f});
    std::vector<float> ts;
    for (const char * bad : {"", ",", "1,", "a", "1e999", "nan", "-0.5", "1 2"}) {
        CHECK_MESSAGE(!llm_tensor_split_parse(bad, &ts), bad);
    }
}

// llama.cpp's rule: unit u of n (the offloaded layers, then the output when -ngl > n_layer) on the first device whose
// cumulative share exceeds u / n
TEST_CASE("-sm layer: consecutive layers on consecutive devices by share, the output counted as one more layer") {
    using v = std::vector<int>;
    CHECK(llm_layer_split(4, 4, {1, 1}) == v{0, 0, 1, 1});
    CHECK(llm_layer_split(3, 4, {1, 1}) == v{0, 0, 1, 1});  // 3 layers + the output
    CHECK(llm_layer_split(3, 2, {1, 1}) == v{0, 1});        // layer 2 on the CPU
    CHECK(llm_layer_split(3, 2, {2, 1}) == v{0, 0});
    CHECK(llm_layer_split(5, 6, {1, 3}) == v{0, 0, 1, 1, 1, 1});
    CHECK(llm_layer_split(4, 99, {1, 1, 1, 1}) == v{0, 0, 1, 2, 3}); // 5 units over 4 devices
    CHECK(llm_layer_split(6, 6, {3, 0, 3}) == v{0, 0, 0, 2, 2, 2});  // a share of 0: no layer
    const v l32 = llm_layer_split(32, 33, {1, 1});                 // Llama-2-7B at -ngl 33: 17 + 15 and the output
    CHECK(std::count(l32.begin(), l32.end(), 0) == 17);
    CHECK(l32.back() == 1);
    CHECK(std::is_sorted(l32.begin(), l32.end()));
}

// -sm row: device d's units (KV heads, FFN blocks) are [first[d], first[d + 1]), first[d] the rounded share before d
TEST_CASE("-sm row: KV heads and FFN blocks by rounded cumulative share") {
    using v = std::vector<int>;
    CHECK(llm_row_split(32, {1, 1}) == v{0, 16, 32});
    CHECK(llm_row_split(8, {1, 1, 1, 1}) == v{0, 2, 4, 6, 8});  // Llama-2-70B's KV heads on 4 GPUs
    CHECK(llm_row_split(4, {1, 3}) == v{0, 1, 4});
    CHECK(llm_row_split(10, {1, 1, 1}) == v{0, 3, 7, 10});   // 3.33 and 6.67 rounded
    CHECK(llm_row_split(43, {1, 1}) == v{0, 22, 43});        // Llama-2-7B's 11008 FFN columns in q4_K blocks
    CHECK(llm_row_split(2, {1, 1, 1}) == v{0, 1, 1, 2});     // a device with nothing: the loader refuses it
    CHECK(llm_row_split(6, {3, 0, 3}) == v{0, 3, 3, 6});     // a share of 0
}

TEST_CASE("KV cache types: -ctk / -ctv (any case), --cache-type sets both, a quantized V with -fa") {
    llm_cli_params p;
    std::string err;
    CHECK(p.cache_type_k == GGML_TYPE_F16);
    CHECK(p.cache_type_v == GGML_TYPE_F16);
    REQUIRE(parse({"-ctk", "Q8_0", "-ctv", "q4_0", "-fa"}, p, err));
    CHECK(p.cache_type_k == GGML_TYPE_Q8_0);
    CHECK(p.cache_type_v == GGML_TYPE_Q4_0);
    CHECK(p.flash_attn == LLM_CLI_SWITCH_ON);
    llm_cli_params p2;
    REQUIRE(parse({"--cache-type", "f32"}, p2, err));
    CHECK(p2.cache_type_k == GGML_TYPE_F32);
    CHECK(p2.cache_type_v == GGML_TYPE_F32);
    llm_cli_params p3;
    REQUIRE(parse({"--cache-type-k", "q4_0", "-fa", "off"}, p3, err));  // a quantized K alone needs no -fa
    CHECK(p3.cache_type_k == GGML_TYPE_Q4_0);
    CHECK(p3.cache_type_v == GGML_TYPE_F16);
}

TEST_CASE("--help: llama.cpp's three groups, every flag with its forms and its default") {
    const std::string u = llm_cli_usage("main");
    const size_t common = u.find("----- common params -----");
    const size_t sampling = u.find("----- sampling params -----");
    const size_t specific = u.find("----- example-specific params -----");
    REQUIRE(common != std::string::npos);
    REQUIRE(sampling != std::string::npos);
    REQUIRE(specific != std::string::npos);
    CHECK(common < sampling);
    CHECK(sampling < specific);
    auto in = [&](const char * s, size_t from, size_t to) {
        const size_t at = u.find(s, from);
        CHECK_MESSAGE((at != std::string::npos && at < to), std::string(s));
    };
    in("-fa, --flash-attn [on|off|auto]", common, sampling);
    in("(default: 'auto'", common, sampling);
    in("--mmap, --no-mmap", common, sampling);
    in("-n, --predict, --n-predict N", common, sampling);
    in("number of tokens to predict (default: -1", common, sampling);
    in("-b, --batch-size N", common, sampling);
    in("(default: 512)", common, sampling);
    in("--ignore-eos", sampling, specific);
    in("--temp N", sampling, specific);
    in("temperature (default: 0.80", sampling, specific);
    in("-j, --json-schema SCHEMA", sampling, specific);
    in("-i, --interactive", specific, u.size());
    in("-r, --reverse-prompt PROMPT", specific, u.size());
    in("-cnv, --conversation, -no-cnv, --no-conversation", specific, u.size());
    in("unlike llama.cpp", specific, u.size());  // no automatic chat mode
    in("-st, --single-turn", specific, u.size());
    in("--warmup, --no-warmup", specific, u.size());
    // every line is at most 120 columns
    size_t start = 0;
    while (start < u.size()) {
        const size_t end = u.find('\n', start);
        CHECK_MESSAGE(end - start <= 120, u.substr(start, end - start));
        start = end + 1;
    }
}

TEST_CASE("UTF-8 validation finds the first bad byte") {
    CHECK(llm_utf8_invalid_at("plain ascii") == -1);
    CHECK(llm_utf8_invalid_at("h\xC3\xA9llo \xF0\x9F\x98\x80") == -1);
    CHECK(llm_utf8_invalid_at("ab\xFFz") == 2);
    CHECK(llm_utf8_invalid_at("ab\xC3") == 2);             // truncated
    CHECK(llm_utf8_invalid_at("\xC0\xAF") == 0);           // overlong
    CHECK(llm_utf8_invalid_at("x\xED\xA0\x80") == 1);      // surrogate
}

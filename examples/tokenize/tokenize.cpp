// tokenize - print the tokens of a text under a GGUF's vocab, like llama.cpp's llama-tokenize.
//
//   tokenize -m model.gguf -p "Hello world"          # one "id -> 'piece'" line per token
//   tokenize -m model.gguf -f prompt.txt --ids       # [1, 15043, 3186]
//   --no-bos: do not add BOS;  --special: parse control tokens written in the text ("<|eot_id|>")
#include "gguf.h"
#include "vocab.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

static void usage(const char * argv0) {
    fprintf(stderr, "usage: %s -m MODEL.gguf (-p TEXT | -f FILE) [--ids] [--no-bos] [--special]\n", argv0);
}

int main(int argc, char ** argv) {
    std::string model, text, file;
    bool have_text = false, ids_only = false, no_bos = false, special = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto value = [&](const char * what) -> const char * {
            if (i + 1 >= argc) {
                fprintf(stderr, "error: %s needs %s\n", a.c_str(), what);
                exit(1);
            }
            return argv[++i];
        };
        if (a == "-m" || a == "--model") {
            model = value("a model path");
        } else if (a == "-p" || a == "--prompt") {
            text = value("a text");
            have_text = true;
        } else if (a == "-f" || a == "--file") {
            file = value("a file path");
        } else if (a == "--ids") {
            ids_only = true;
        } else if (a == "--no-bos") {
            no_bos = true;
        } else if (a == "--special") {
            special = true;
        } else if (a == "-h" || a == "--help") {
            usage(argv[0]);
            return 0;
        } else {
            fprintf(stderr, "error: unknown argument '%s' (see --help)\n", a.c_str());
            return 1;
        }
    }
    if (model.empty()) {
        fprintf(stderr, "error: no model given (-m MODEL.gguf)\n");
        return 1;
    }
    if (have_text == !file.empty()) {
        fprintf(stderr, "error: give exactly one of -p TEXT or -f FILE\n");
        return 1;
    }
    if (!file.empty()) {
        std::ifstream f(file, std::ios::binary);
        if (!f) {
            fprintf(stderr, "error: cannot open '%s': %s\n", file.c_str(), strerror(errno));
            return 1;
        }
        text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }

    std::string err;
    gguf_context * g = gguf_init_from_file(model.c_str(), { /*no_alloc=*/true, nullptr }, &err);
    if (!g) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    llm_vocab vocab;
    const bool ok = llm_vocab_load(vocab, g, &err);
    gguf_free(g);
    if (!ok) {
        fprintf(stderr, "error: %s: %s\n", model.c_str(), err.c_str());
        return 1;
    }

    const std::vector<int32_t> ids = llm_tokenize(vocab, text, !no_bos, special);
    if (ids_only) {
        printf("[");
        for (size_t i = 0; i < ids.size(); ++i) {
            printf("%s%d", i ? ", " : "", ids[i]);
        }
        printf("]\n");
    } else {
        for (const int32_t id : ids) {
            printf("%6d -> '%s'\n", id, llm_token_to_piece(vocab, id, true).c_str());
        }
    }
    return 0;
}

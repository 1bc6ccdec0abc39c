// console.cpp - colors and input lines of main (see console.h).
#include "console.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

bool console_use_color(llm_cli_switch mode) {
    if (mode != LLM_CLI_SWITCH_AUTO) return mode == LLM_CLI_SWITCH_ON;
    const char * no_color = std::getenv("NO_COLOR");
    if (no_color && no_color[0] != '\0') return false;
    const char * term = std::getenv("TERM");
    if (term && std::strcmp(term, "dumb") == 0) return false;
    return isatty(fileno(stdout)) != 0;
}

void console_set_display(bool color, console_display d) {
    if (!color) return;
    switch (d) {
        case CONSOLE_DISPLAY_RESET: fputs("\x1b[0m", stdout); break;
        case CONSOLE_DISPLAY_PROMPT: fputs("\x1b[33m", stdout); break;
        case CONSOLE_DISPLAY_USER_INPUT: fputs("\x1b[1m\x1b[32m", stdout); break;
    }
    fflush(stdout);
}

bool console_read_input(std::istream & in, std::string & out, bool multiline) {
    out.clear();
    std::string line;
    bool any = false;
    while (std::getline(in, line)) {
        any = true;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty() && line.back() == '/') {
            line.pop_back();
            out += line;
            return true;
        }
        const bool backslash = !line.empty() && line.back() == '\\';
        if (backslash) line.pop_back();
        out += line;
        if (multiline == backslash) return true;  // plain: a '\' goes on; multiline: a '\' ends
        out += '\n';
    }
    return any;  // EOF: whatever was read before it
}

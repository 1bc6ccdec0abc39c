// console.h - main's terminal side: ANSI colors that set the prompt and the user's input apart from the generated
// text (-co), and reading one input of interactive and chat mode (llama.cpp's line conventions).
//
//   const bool color = console_use_color(params.color);
//   console_set_display(color, CONSOLE_DISPLAY_USER_INPUT);
//   std::string line;
//   const bool got = console_read_input(std::cin, line, params.multiline_input);  // false: EOF
//   console_set_display(color, CONSOLE_DISPLAY_RESET);
#pragma once

#include "args.h"

#include <istream>
#include <string>

enum console_display {
    CONSOLE_DISPLAY_RESET,       // the generated text: the terminal's own color
    CONSOLE_DISPLAY_PROMPT,      // yellow
    CONSOLE_DISPLAY_USER_INPUT,  // bold green (the terminal's echo of what the user types)
};

// Whether -co MODE colors stdout: on, off, or auto (stdout is a terminal, NO_COLOR unset or empty, TERM not dumb).
bool console_use_color(llm_cli_switch mode);
// Switch stdout's color; nothing when color is false.
void console_set_display(bool color, console_display d);
// One input from `in`: false at EOF with nothing read. Lines are joined with '\n': a line ending in '\' goes on to
// the next (with multiline, lines go on until one ends in '\'); a line ending in '/' ends the input there. The
// '\' or '/' and the last newline are not part of out; a '\r' before a newline is dropped.
bool console_read_input(std::istream & in, std::string & out, bool multiline);

// stats.h - small statistics the tools share.
#pragma once

#include <algorithm>
#include <vector>

// the median of v (the upper one of an even count), 0 when v is empty
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

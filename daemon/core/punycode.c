/* RFC 3492 Punycode encoding: the bootstring parameters of section 5. */
#include "core/punycode.h"

#define PUNYCODE_BASE 36
#define PUNYCODE_TMIN 1
#define PUNYCODE_TMAX 26
#define PUNYCODE_SKEW 38
#define PUNYCODE_DAMP 700
#define PUNYCODE_BIAS 72
#define PUNYCODE_N 0x80

static uint32_t	punycode_adapt(uint32_t, uint32_t, bool);
static char	punycode_digit(uint32_t);

/* RFC 3492 section 6.1. */
static uint32_t
punycode_adapt(uint32_t delta, uint32_t numpoints, bool first)
{
	uint32_t k = 0;

	delta = first ? delta / PUNYCODE_DAMP : delta / 2;
	delta += delta / numpoints;
	while (delta > ((PUNYCODE_BASE - PUNYCODE_TMIN) * PUNYCODE_TMAX) / 2) {
		delta /= PUNYCODE_BASE - PUNYCODE_TMIN;
		k += PUNYCODE_BASE;
	}
	return k + (PUNYCODE_BASE - PUNYCODE_TMIN + 1) * delta /
	    (delta + PUNYCODE_SKEW);
}

static char
punycode_digit(uint32_t d)
{
	return (char)(d < 26 ? 'a' + d : '0' + (d - 26));
}

/* RFC 3492 section 6.3, lowercase digits. */
bool
punycode_encode(const uint32_t *cp, size_t n, char *out, size_t outlen)
{
	uint32_t next = PUNYCODE_N, delta = 0, bias = PUNYCODE_BIAS;
	uint32_t m, q, t, k, h, b;
	size_t i, o = 0;

	if (outlen == 0)
		return false;
	for (i = 0; i < n; i++) {
		if (cp[i] >= 0x80)
			continue;
		if (o + 1 >= outlen)
			return false;
		out[o++] = (char)cp[i];
	}
	h = b = (uint32_t)o;
	if (b > 0) {
		if (o + 1 >= outlen)
			return false;
		out[o++] = '-';
	}
	while (h < n) {
		m = UINT32_MAX;
		for (i = 0; i < n; i++)
			if (cp[i] >= next && cp[i] < m)
				m = cp[i];
		if (m - next > (UINT32_MAX - delta) / (h + 1))
			return false;
		delta += (m - next) * (h + 1);
		next = m;
		for (i = 0; i < n; i++) {
			if (cp[i] < next && ++delta == 0)
				return false;
			if (cp[i] != next)
				continue;
			for (q = delta, k = PUNYCODE_BASE;; k += PUNYCODE_BASE) {
				t = k <= bias ? PUNYCODE_TMIN :
				    k >= bias + PUNYCODE_TMAX ? PUNYCODE_TMAX :
				    k - bias;
				if (q < t)
					break;
				if (o + 1 >= outlen)
					return false;
				out[o++] = punycode_digit(t + (q - t) %
				    (PUNYCODE_BASE - t));
				q = (q - t) / (PUNYCODE_BASE - t);
			}
			if (o + 1 >= outlen)
				return false;
			out[o++] = punycode_digit(q);
			bias = punycode_adapt(delta, h + 1, h == b);
			delta = 0;
			h++;
		}
		delta++;
		next++;
	}
	out[o] = '\0';
	return true;
}

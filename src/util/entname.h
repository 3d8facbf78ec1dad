/*
 * entname.h -- the front ends' check of a name a directory stream returned
 * (ferrite ls/cp, the FUSE daemon, the preload shim). A pool is input: a
 * damaged or crafted one can hold entries whose names are not names, and a
 * front end that joins such a name to a path writes where it should not
 * (`cp -r` of an entry "../../x"). The engines refuse corrupt entries
 * themselves (-EUCLEAN); this is the front ends' own line of defence.
 *
 * Refused: the empty name; a name containing '/'; a name containing a NUL
 * byte (seen as bytes after the terminator: the reader zeroes the name
 * buffer before each ferrite_readdir, and the engine copies the stored
 * name and a terminator); and a second "." or "..". A stream yields one "."
 * and one ".." (the pm engine first, a tiered pool where the backing
 * directory puts them); the state remembers which were seen and is reset
 * when the stream is repositioned (seekdir, rewinddir), so after a seek one
 * stray dot entry may pass -- harmless, since no front end looks up or
 * builds a path from "." or "..".
 */
#ifndef FERRITE_UTIL_ENTNAME_H
#define FERRITE_UTIL_ENTNAME_H

#include <stddef.h>
#include <string.h>

struct fr_entname_state {
	unsigned dots; /* bit 0: "." seen, bit 1: ".." seen */
};

static inline void fr_entname_reset(struct fr_entname_state *s)
{
	s->dots = 0;
}

/* Why NAME (a buffer of cap bytes, zeroed before the read) cannot be a
 * directory entry, or NULL when it can. */
static inline const char *fr_entname_problem(struct fr_entname_state *s, const char *name,
					     size_t cap)
{
	size_t len = strnlen(name, cap);
	if (len == 0)
		return "the name is empty";
	if (len == cap)
		return "the name has no end";
	for (size_t i = len + 1; i < cap; i++)
		if (name[i])
			return "the name contains a NUL byte";
	if (memchr(name, '/', len))
		return "the name contains '/'";
	if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.'))) {
		unsigned bit = len == 1 ? 1u : 2u;
		if (s && (s->dots & bit))
			return len == 1 ? "a second \".\" entry" : "a second \"..\" entry";
		if (s)
			s->dots |= bit;
	}
	return NULL;
}

/* NAME (at most ncap bytes, up to its NUL) for a message: bytes outside
 * printable ASCII, '\\' and '\'' as \xHH, cut with "..." to fit out
 * (cap >= 8). Returns out. */
static inline const char *fr_entname_show(const char *name, size_t ncap, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	for (size_t i = 0; i < ncap && name[i]; i++) {
		unsigned char c = (unsigned char)name[i];
		int plain = c >= 0x20 && c < 0x7f && c != '\\' && c != '\'';
		if (n + (plain ? 1 : 4) + 4 > cap) {
			memcpy(out + n, "...", 3);
			n += 3;
			break;
		}
		if (plain) {
			out[n++] = (char)c;
		} else {
			out[n++] = '\\';
			out[n++] = 'x';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
	return out;
}

#endif

"""Numbers as the messages the commands print say them: counted nouns
("1 epoch", "2 epochs") and lengths of time ("40 s", "12 min", "3.4 h")."""


def counted(number, noun, plural=None, spec=""):
    """`number` formatted with the format spec `spec` (e.g. "," for
    thousands), then `noun`, or its plural (default: `noun` + "s") unless
    `number` is 1."""
    return f"{number:{spec}} {noun if number == 1 else plural or noun + 's'}"


def duration(seconds):
    """A length of time as a reader wants it: "40 s", "12 min", "3.4 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"

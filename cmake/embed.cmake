# Writes the file IN as a C string named NAME into OUT (cmake -DIN= -DOUT= -DNAME= -P embed.cmake).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE "${OUT}" "/* Generated from ${IN}; do not edit. */\nconst char ${NAME}[] = {${body}0};\n")

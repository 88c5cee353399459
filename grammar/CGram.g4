// The .cgram language: an extended EBNF with regex terminals, any! and except!.
// Lexical errors (unterminated literals and comments, stray characters) are
// lexed as tokens of their own so that the front end can report them in the
// grammar author's terms instead of ANTLR's.
grammar CGram;

file_       : rule_* EOF ;
rule_       : IDENT (DEFINE | EQUALS) expression SEMI ;
expression  : sequence (PIPE sequence)* ;
sequence    : item (COMMA? item)* ;
item        : primary quantifier* ;
quantifier  : QUESTION
            | STAR
            | PLUS
            | LBRACE INT RBRACE
            | LBRACE INT COMMA INT? RBRACE
            | LBRACE COMMA INT RBRACE
            ;
primary     : IDENT                                   # ruleRef
            | STRING                                  # literal
            | REGEX                                   # regex
            | LPAREN expression RPAREN                # group
            | LBRACK expression RBRACK                # isoOptional
            | LBRACE expression RBRACE                # isoRepeat
            | ANY                                     # anyToken
            | EXCEPT LPAREN expression (COMMA INT)? RPAREN   # except
            ;

DEFINE   : '::=' ;
EQUALS   : '=' ;
SEMI     : ';' ;
PIPE     : '|' ;
COMMA    : ',' ;
LPAREN   : '(' ;
RPAREN   : ')' ;
LBRACK   : '[' ;
RBRACK   : ']' ;
LBRACE   : '{' ;
RBRACE   : '}' ;
QUESTION : '?' ;
STAR     : '*' ;
PLUS     : '+' ;
ANY      : 'any!' ;
EXCEPT   : 'except!' ;
IDENT    : [a-zA-Z_] [a-zA-Z0-9_]* ;
INT      : [0-9]+ ;
STRING   : SQ_BODY '\'' | DQ_BODY '"' ;
REGEX    : '#' STRING ;
COMMENT  : '(*' COMMENT_BODY '*'+ ')' -> skip ;
WS       : [ \t\r\n\f]+ -> skip ;

// Error tokens: each matches only where its well-formed twin cannot.
UNTERMINATED_REGEX   : '#' (SQ_BODY | DQ_BODY) '\\'? ;
UNTERMINATED_STRING  : (SQ_BODY | DQ_BODY) '\\'? ;
UNTERMINATED_COMMENT : '(*' COMMENT_BODY '*'* EOF ;
STRAY_CHAR           : . ;

fragment SQ_BODY      : '\'' (~['\\\r\n] | '\\' ~[\r\n])* ;
fragment DQ_BODY      : '"' (~["\\\r\n] | '\\' ~[\r\n])* ;
fragment COMMENT_BODY : (~'*' | '*'+ ~[*)])* ;

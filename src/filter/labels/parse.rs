//! The string syntax of label selectors (`kubectl -l`, `?labelSelector=`): a tokenizer and a
//! recursive-descent parser whose errors name the column.

use std::collections::BTreeSet;

use super::requirement::Requirement;
use crate::vocab::names::{label_value, qualified_name};

#[derive(Clone, Debug, PartialEq)]
enum Token {
    /// A key, a value, or `in` / `notin`.
    Word(String),
    /// A run of operator characters: `=`, `==`, `!=`, `!`, `<`, `>`, or something unknown.
    Op(String),
    Open,
    Close,
    Comma,
    End,
}

fn is_op_char(c: char) -> bool {
    matches!(c, '=' | '!' | '<' | '>' | '~')
}

fn is_word_char(c: char) -> bool {
    !c.is_whitespace() && !is_op_char(c) && !matches!(c, '(' | ')' | ',')
}

/// A selector parser; errors are `(column, message)`, the column counting characters from 1.
pub(super) struct Parser {
    chars: Vec<char>,
    pos: usize,
    /// The current token and its column.
    token: Token,
    column: usize,
}

type ParseResult<T> = Result<T, (usize, String)>;

impl Parser {
    pub(super) fn new(text: &str) -> Parser {
        let mut parser = Parser {
            chars: text.chars().collect(),
            pos: 0,
            token: Token::End,
            column: 1,
        };
        parser.advance();
        parser
    }

    /// Moves to the next token.
    fn advance(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
        self.column = self.pos + 1;
        let Some(&c) = self.chars.get(self.pos) else {
            self.token = Token::End;
            return;
        };
        let run = |parser: &mut Parser, pred: fn(char) -> bool| {
            let start = parser.pos;
            while parser.chars.get(parser.pos).is_some_and(|c| pred(*c)) {
                parser.pos += 1;
            }
            parser.chars[start..parser.pos].iter().collect::<String>()
        };
        self.token = match c {
            '(' => {
                self.pos += 1;
                Token::Open
            }
            ')' => {
                self.pos += 1;
                Token::Close
            }
            ',' => {
                self.pos += 1;
                Token::Comma
            }
            c if is_op_char(c) => Token::Op(run(self, is_op_char)),
            _ => Token::Word(run(self, is_word_char)),
        };
    }

    fn describe(&self) -> String {
        match &self.token {
            Token::Word(w) => format!("'{w}'"),
            Token::Op(o) => format!("'{o}'"),
            Token::Open => "'('".to_string(),
            Token::Close => "')'".to_string(),
            Token::Comma => "','".to_string(),
            Token::End => "the end".to_string(),
        }
    }

    /// The requirements of the whole text.
    pub(super) fn parse(mut self) -> ParseResult<Vec<Requirement>> {
        let mut requirements = Vec::new();
        if self.token == Token::End {
            return Ok(requirements);
        }
        loop {
            requirements.push(self.requirement()?);
            match self.token {
                Token::End => break,
                Token::Comma => self.advance(),
                _ => return self.unexpected("',' or the end"),
            }
        }
        Ok(requirements)
    }

    /// The error at the current token: what was found, what was `expected`.
    fn unexpected<T>(&self, expected: &str) -> ParseResult<T> {
        Err((
            self.column,
            format!("found {}, expected {expected}", self.describe()),
        ))
    }

    /// The current word, validated as a label `what` (key or value), or `None` at another token.
    fn word(
        &mut self,
        what: &str,
        validate: fn(&str) -> Result<(), String>,
    ) -> ParseResult<Option<String>> {
        let Token::Word(w) = &self.token else {
            return Ok(None);
        };
        let word = w.clone();
        validate(&word)
            .map_err(|e| (self.column, format!("invalid label {what} '{word}': {e}")))?;
        self.advance();
        Ok(Some(word))
    }

    fn key(&mut self) -> ParseResult<String> {
        match self.word("key", qualified_name)? {
            Some(key) => Ok(key),
            None => self.unexpected("a label key"),
        }
    }

    fn requirement(&mut self) -> ParseResult<Requirement> {
        if let Token::Op(op) = &self.token {
            if op == "!" {
                self.advance();
                let key = self.key()?;
                return match self.token {
                    Token::Comma | Token::End => Ok(Requirement::DoesNotExist(key)),
                    _ => self.unexpected(&format!("',' or the end after !{key}")),
                };
            }
        }
        let key = self.key()?;
        let (column, token) = (self.column, self.token.clone());
        match token {
            Token::Comma | Token::End => Ok(Requirement::Exists(key)),
            Token::Word(w) if w == "in" || w == "notin" => {
                self.advance();
                let values = self.values()?;
                Ok(if w == "in" {
                    Requirement::In(key, values)
                } else {
                    Requirement::NotIn(key, values)
                })
            }
            Token::Op(op) => {
                self.advance();
                match op.as_str() {
                    "=" | "==" => Ok(Requirement::Equals(key, self.value()?)),
                    "!=" => Ok(Requirement::NotEquals(key, self.value()?)),
                    ">" | "<" => {
                        let value_column = self.column;
                        let value = self.value()?;
                        let n = value.parse::<i64>().map_err(|_| {
                            (
                                value_column,
                                format!("'{op}' needs an integer value, found '{value}'"),
                            )
                        })?;
                        Ok(if op == ">" {
                            Requirement::GreaterThan(key, n)
                        } else {
                            Requirement::LessThan(key, n)
                        })
                    }
                    other => Err((column, format!("unknown operator '{other}'"))),
                }
            }
            // Nothing was consumed since `column` was taken.
            _ => self.unexpected("an operator (=, ==, !=, in, notin, <, >), ',' or the end"),
        }
    }

    /// A single value after `=`, `==`, `!=`, `<`, `>`; empty when a comma or the end follows.
    fn value(&mut self) -> ParseResult<String> {
        if let Some(value) = self.word("value", label_value)? {
            return Ok(value);
        }
        match self.token {
            Token::Comma | Token::End => Ok(String::new()),
            _ => self.unexpected("a label value"),
        }
    }

    /// `( v1, v2, ... )`; an empty element between commas, or `()`, is the empty value.
    fn values(&mut self) -> ParseResult<BTreeSet<String>> {
        if self.token != Token::Open {
            return self.unexpected("'('");
        }
        self.advance();
        let mut values = BTreeSet::new();
        if self.token == Token::Close {
            // As Kubernetes reads it (`labels.Parse`): `()` is the empty value, the same set
            // that `(,)` gives, and how Kubernetes writes that set back.
            self.advance();
            values.insert(String::new());
            return Ok(values);
        }
        loop {
            match &self.token {
                Token::Word(_) => {
                    values.insert(self.value()?);
                }
                Token::Comma | Token::Close => {
                    values.insert(String::new());
                }
                _ => return self.unexpected("a label value"),
            }
            match self.token {
                Token::Comma => self.advance(),
                Token::Close => {
                    self.advance();
                    return Ok(values);
                }
                _ => return self.unexpected("',' or ')'"),
            }
        }
    }
}

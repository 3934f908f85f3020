//! The syntax tree of the Groovy subset shared by MAL expressions and LAL scripts.
//!
//! The tree is purely syntactic: MAL and LAL give meaning to it in their own modules. Every node
//! carries a [`Span`] so that semantic checks can point at the offending token. Nodes grafted from
//! another scalar (MAL's `expPrefix`/`expSuffix`) keep the spans of the scalar they came from,
//! which is why a span stores its file position and not only offsets.

/// Where a node was written: byte offsets inside the YAML scalar it was parsed from, plus the
/// file-relative, 1-based line and column of `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub column: usize,
}

impl Span {
    /// From the start of `self` to the end of `other`. Offsets only make sense within one scalar;
    /// for a node grafted across scalars (MAL prefix/suffix) only the start position is meaningful.
    pub fn to(self, other: Span) -> Span {
        Span {
            end: other.end.max(self.start),
            ..self
        }
    }
}

/// An identifier, or a name written where Groovy allows one (a property name, a named argument key).
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// A bare name: a variable, a MAL sample family, a class such as `Layer`, a constant such as `SUM`.
    Name(String),
    Number(Number),
    Str(StrLit),
    /// A double-quoted (or slashy) string with `${...}` or `$name` interpolation.
    GString(Vec<GStringPart>),
    Bool(bool),
    Null,
    List(Vec<Expr>),
    /// `[k: v, ...]`; `[:]` is the empty map. A bare-name key is the string of that name, as in Groovy.
    Map(Vec<MapEntry>),
    Closure(Box<Closure>),
    /// `receiver.name` or `receiver?.name`.
    Property {
        receiver: Box<Expr>,
        name: Ident,
        safe: bool,
    },
    Call(Box<Call>),
    /// `receiver[index]`
    Index {
        receiver: Box<Expr>,
        index: Box<Expr>,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `condition ? then : otherwise`
    Ternary {
        condition: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// `value ?: fallback`
    Elvis {
        value: Box<Expr>,
        fallback: Box<Expr>,
    },
    /// `value as Type`; the type is a (possibly dotted) class name.
    Cast {
        value: Box<Expr>,
        ty: Ident,
    },
    Assign {
        op: AssignOp,
        target: Box<Expr>,
        value: Box<Expr>,
    },
    /// Parentheses are kept: MAL's `expSuffix` is applied to `(exp)` and the shape rules care.
    Paren(Box<Expr>),
}

/// A numeric literal; `text` is the source spelling (with any `L`/`D`/... suffix).
#[derive(Debug, Clone, PartialEq)]
pub struct Number {
    pub text: String,
    pub value: NumberValue,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NumberValue {
    Integer(i64),
    /// Decimals, and integers too large for `i64`.
    Decimal(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct StrLit {
    pub value: String,
    pub delimiter: StrDelimiter,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrDelimiter {
    Single,
    Double,
    TripleSingle,
    TripleDouble,
    /// `/.../`
    Slashy,
    /// `$/.../$`
    DollarSlashy,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GStringPart {
    Text(String),
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct MapEntry {
    pub key: Expr,
    pub value: Expr,
}

/// `{ a, b -> statements }` or `{ statements }` (then Groovy's implicit `it` applies).
#[derive(Debug, Clone, PartialEq)]
pub struct Closure {
    pub params: Vec<Param>,
    pub body: Block,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub ty: Option<Ident>,
    pub name: Ident,
}

/// A method or function call in any of Groovy's spellings.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `None` for a receiver-less call: a global function (`time()`, `tag("x")`), a DSL statement
    /// (`json {}`, `rpm 6000`), or the head of a MAL `expPrefix`/`expSuffix` chain.
    pub receiver: Option<Box<Expr>>,
    /// `?.` was used.
    pub safe: bool,
    /// `ns` in MAL's extension call `ns::method(...)`.
    pub namespace: Option<Ident>,
    pub method: Ident,
    /// Positional and named arguments in source order; a trailing closure is the last argument.
    pub args: Vec<Arg>,
    pub style: CallStyle,
}

impl Call {
    /// A bare name used as a statement (`extractor`, `rpm`, `abort`): a receiver-less,
    /// argument-less command call, the form LAL's statements are checked and run in.
    pub fn bare(name: &str, span: Span) -> Call {
        Call {
            receiver: None,
            safe: false,
            namespace: None,
            method: Ident { name: name.to_string(), span },
            args: Vec::new(),
            style: CallStyle::Command,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStyle {
    /// `m(a, b)`, possibly followed by a trailing closure `m(a) { ... }`.
    Parens,
    /// A command expression without parentheses: `rpm 6000`, `tag level: parsed.level`.
    Command,
    /// Only a closure: `json {}`, `sink { ... }`.
    ClosureOnly,
}

/// A call argument; `name` is set for `key: value` and MAL's `by=[...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Not,
    Neg,
    Plus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Or,
    And,
    RegexFind,
    RegexMatch,
    Eq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::RegexFind => "=~",
            BinaryOp::RegexMatch => "==~",
            BinaryOp::Eq => "==",
            BinaryOp::NotEq => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::In => "in",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignOp {
    Assign,
    Add,
    Sub,
    Mul,
    Div,
}

/// A sequence of statements: a closure body, an `if` branch, or a whole LAL script.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub statements: Vec<Stmt>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StmtKind {
    Expr(Expr),
    /// `def name = init` (`ty` is `None`) or `Type name = init`.
    Local {
        ty: Option<Ident>,
        name: Ident,
        init: Option<Expr>,
    },
    If(IfStmt),
    Return(Option<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct IfStmt {
    pub condition: Expr,
    pub then: Block,
    pub otherwise: Option<Else>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Else {
    Block(Block),
    /// `else if (...)`
    If(Box<IfStmt>),
}
